"""Consolidation: near-duplicates merge into one card with all evidence; idempotent; atomic."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select
from sqlmodel import Session, col

from memory_core.consolidate import stage as stage_module
from memory_core.consolidate.apply import apply_plan
from memory_core.consolidate.plan import plan_merges
from memory_core.consolidate.stage import _rows, consolidate
from memory_core.db import session_scope
from memory_core.decay import record_feedback
from memory_core.models.card import Card, CardEvidence, CardVersion
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory
from memory_core.serve.uses import UseRecorder
from memory_core.settings import ConsolidateRules

RULES = ConsolidateRules()


def _card(
    engine,
    *,
    scenario,
    pre,
    tools,
    confidence=0.6,
    evidence=1,
    modes=(),
    kind="experience",
    outcome="success",
):
    card_id = uuid.uuid4()
    with session_scope(engine) as s:
        s.add(
            Card(
                card_id=card_id,
                namespace="ns",
                kind=kind,
                scenario=scenario,
                preconditions=list(pre),
                action_sequence=[{"tool": t} for t in tools],
                failure_modes=[{"mode": m, "handling": "retry"} for m in modes],
                confidence=confidence,
                status="active",
                signature=uuid.uuid4().hex,
                evidence_count=evidence,
                use_count=1,
            )
        )
        s.flush()
        for i in range(evidence):
            t = Trajectory(
                namespace="ns",
                key=f"{card_id}-{i}",
                content_hash=uuid.uuid4().hex,
                source_format="steps",
                task_type="default",
            )
            s.add(t)
            s.flush()
            s.add(
                CardEvidence(
                    card_id=card_id, trajectory_id=t.id, step=i, result={"outcome": outcome}
                )
            )
    return card_id


def _statuses(engine):
    with Session(engine) as s:
        return {c.card_id: c for c in s.execute(select(Card)).scalars()}


def test_same_lesson_three_times_becomes_one_card(engine):
    pre = ['last_tool == "get_order"', 'last_error == "not found"']
    a = _card(
        engine,
        scenario="order lookup fails",
        pre=pre,
        tools=["find_order"],
        evidence=3,
        modes=["order 12 not found"],
    )
    b = _card(
        engine,
        scenario="Order not found",
        pre=list(reversed(pre)),
        tools=["find_order"],
        modes=["Order 345 not found"],
    )
    c = _card(
        engine,
        scenario="lookup by id fails",
        pre=['last_tool == "GET_ORDER"', 'last_error ==  "Not Found"'],
        tools=["FIND_ORDER"],
        modes=["order 6 not found"],  # the same error: only the masked number differs
    )
    other = _card(engine, scenario="order lookup fails", pre=pre, tools=["cancel_order"])
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    assert (report.merges, report.absorbed) == (1, 2)
    cards = _statuses(engine)
    assert cards[a].status == "active" and cards[other].status == "active"
    for gone in (b, c):
        assert cards[gone].status == "superseded" and cards[gone].superseded_by == a
    survivor = cards[a]
    assert survivor.evidence_count == 5 and survivor.use_count == 3
    # one error listed once (its signature), as the survivor worded it
    assert [m["mode"] for m in survivor.failure_modes] == ["order 12 not found"]
    # evidence, not confidences, combine: Beta(1+5, 1) over the five runs (6/7), plus the
    # survivor's own offset from its evidence estimate (0.6 - 4/5)
    assert survivor.confidence == pytest.approx(6 / 7 + 0.6 - 4 / 5, abs=1e-6)
    with Session(engine) as s:
        assert (
            s.execute(select(CardEvidence).where(col(CardEvidence.card_id) == a)).all().__len__()
            == 5
        )
        reasons = [v.reason for v in s.execute(select(CardVersion)).scalars()]
    assert sum("merged into" in r for r in reasons) == 2 and any("merged 2" in r for r in reasons)
    again = consolidate(engine=engine, namespace="ns", rules=RULES)
    assert (again.merges, again.absorbed) == (0, 0)
    assert _statuses(engine)[a].version == survivor.version


def test_word_overlap_merges_only_within_the_same_tools(engine):
    a = _card(
        engine,
        scenario="retry the payment call after a 429 rate limit",
        pre=['tool == "pay" && retry_count < 2'],
        tools=["pay"],
    )
    b = _card(
        engine,
        scenario="retry the payment call after a 429 rate limit",
        pre=['tool == "pay" && retry_count < 3'],
        tools=["pay"],
    )
    c = _card(
        engine,
        scenario="retry the payment call after a 429 rate limit",
        pre=['tool == "refund" && retry_count < 2'],
        tools=["refund"],
    )
    # the same words, but a recovery (it reads last_tool/last_error): another lesson
    d = _card(
        engine,
        scenario="retry the payment call after a 429 rate limit",
        pre=['last_tool == "pay" && last_error == "429"'],
        tools=["pay"],
    )
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    assert report.absorbed == 1
    cards = _statuses(engine)
    assert {cards[a].status, cards[b].status} == {"active", "superseded"}
    assert cards[c].status == "active" and cards[d].status == "active"


def test_dry_run_changes_nothing(engine):
    pre = ['tool == "x"']
    _card(engine, scenario="s1", pre=pre, tools=["x"])
    _card(engine, scenario="s2", pre=pre, tools=["x"])
    before = {k: (v.status, v.version) for k, v in _statuses(engine).items()}
    report = consolidate(engine=engine, namespace="ns", rules=RULES, dry_run=True)
    assert report.absorbed == 1 and len(report.plan) == 1
    assert {k: (v.status, v.version) for k, v in _statuses(engine).items()} == before


def test_a_merge_whose_cards_changed_after_planning_waits_for_the_next_run(engine, monkeypatch):
    """A feedback (version) on one merge and a use (use_count, no version) on another land
    between plan and apply: those two merges are left out, nothing the API wrote is lost,
    the third merge is applied; the next run merges the rest. A run that meets such a change
    names it (deferred_ids, by survivor) and the run after merges it."""

    def pair(t: str) -> list[uuid.UUID]:
        return [
            _card(engine, scenario=f"{t}{i}", pre=[f'tool == "{t}"'], tools=[t], evidence=2 - i)
            for i in (0, 1)
        ]

    x, y, z = pair("x"), pair("y"), pair("z")
    plan = plan_merges(_rows(engine, "ns"), vectors=None, cosine=0.9, jaccard=0.8)
    assert len(plan.merges) == 3
    record_feedback(engine=engine, namespace="ns", card_id=x[1], outcome="success")
    recorder = UseRecorder(engine=engine)
    recorder.record(namespace="ns", card_ids=[y[0]])
    assert recorder.flush() == 1
    with session_scope(engine) as s:
        applied = apply_plan(s, plan, now=utcnow())
    assert [m.survivor.card_id for m in applied.merges] == [z[0]]
    cards = _statuses(engine)
    assert cards[x[1]].status == "active" and cards[x[1]].success_count == 1
    assert cards[y[0]].status == "active" and cards[y[0]].use_count == 2  # the use kept
    assert cards[z[1]].superseded_by == z[0]

    def feedback_then_apply(session, plan, now):  # a feedback on x lands after planning
        record_feedback(engine=engine, namespace="ns", card_id=x[1], outcome="success")
        return apply_plan(session, plan, now)

    monkeypatch.setattr(stage_module, "apply_plan", feedback_then_apply)
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    assert report.absorbed == 1 and report.deferred == 1 and report.deferred_ids == [x[0]]
    monkeypatch.undo()
    cards = _statuses(engine)
    assert cards[x[1]].status == "active" and cards[y[1]].superseded_by == y[0]
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    assert report.absorbed == 1 and report.deferred == 0 and report.deferred_ids == []
    cards = _statuses(engine)
    assert cards[x[1]].superseded_by == x[0] and cards[y[1]].superseded_by == y[0]
    assert cards[y[0]].use_count == 3 and cards[x[0]].success_count == 2  # sums include them


def test_contradicting_facts_keep_the_newest(engine):
    old = _card(engine, scenario="db", pre=[], tools=[], kind="fact", evidence=0)
    new = _card(engine, scenario="db", pre=[], tools=[], kind="fact", evidence=0)
    with session_scope(engine) as s:
        for cid, value in ((old, "mysql"), (new, "postgres")):
            card = s.get(Card, cid)
            card.key, card.query, card.value = "db", "which db?", value
        s.get(Card, new).created_at = s.get(Card, old).created_at.replace(year=2030)
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    assert report.facts_superseded == 1
    cards = _statuses(engine)
    assert cards[old].status == "superseded" and cards[old].superseded_by == new
    assert cards[new].status == "active"


def test_a_newer_claim_does_not_retire_a_corroborated_fact(engine):
    old = _card(engine, scenario="tier", pre=[], tools=[], kind="fact", evidence=0)
    new = _card(engine, scenario="tier", pre=[], tools=[], kind="fact", evidence=0)
    with session_scope(engine) as s:
        for cid, value, standing in ((old, "bronze", "corroborated"), (new, "gold", "claim")):
            card = s.get(Card, cid)
            card.key, card.query, card.value, card.standing = "c1.tier", "tier?", value, standing
        s.get(Card, new).created_at = s.get(Card, old).created_at.replace(year=2030)
    assert consolidate(engine=engine, namespace="ns", rules=RULES).facts_superseded == 1
    cards = _statuses(engine)
    assert cards[new].status == "superseded" and cards[new].superseded_by == old
    assert cards[old].status == "active"


@pytest.mark.parametrize(
    ("answer", "expect"),
    [
        ('{"relation": "same", "reason": "both wait then retry"}', "merged"),
        ('{"relation": "contradicts", "reason": "retry now vs wait"}', "superseded"),
        ('{"relation": "refines", "reason": "adds a case"}', "unchanged"),
        ("not json at all {{", "unchanged"),
        ('{"relation": "delete everything"}', "unchanged"),
    ],
)
def test_the_llm_judges_ambiguous_pairs_and_bad_answers_change_nothing(engine, answer, expect):
    from memory_core.consolidate.judge import llm_judge
    from memory_core.llm.cache import SQLAnswerCache
    from memory_core.llm.client import OpenAICompatibleLLM
    from memory_core.models.llm_answer import LLMAnswer
    from tests.helpers.scripted_llm import Reply, ScriptedLLM

    old = _card(
        engine,
        scenario="after the payment call failed with a rate limit retry it right away",
        pre=['last_tool == "pay" && last_error == "http 429"'],
        tools=["pay"],
    )
    new = _card(
        engine,
        scenario="after the payment call failed with a rate limit wait before a retry",
        pre=['last_tool == "pay" && last_error == "http 429 too many requests"'],
        tools=["pay"],
    )
    with session_scope(engine) as s:  # make the second one clearly newer
        s.get(Card, new).created_at = s.get(Card, old).created_at.replace(year=2030)
    with ScriptedLLM(lambda body, n: Reply(answer)) as server:
        llm = OpenAICompatibleLLM(base_url=server.url, model="judge-1", api_key=None)
        judge = llm_judge(llm=llm, cache=SQLAnswerCache(engine), namespace="ns")
        report = consolidate(engine=engine, namespace="ns", rules=RULES, judge=judge)
        calls = server.calls()
        again = consolidate(engine=engine, namespace="ns", rules=RULES, judge=judge)
        if "refines" in answer:  # a valid judgement is cached: the next run does not ask again
            assert server.calls() == calls
            with Session(engine) as s:  # marked with its namespace, whose deletion takes it
                assert s.execute(select(LLMAnswer.namespace)).scalars().all() == ["ns"]
    cards = _statuses(engine)
    assert report.judged == 1
    if expect == "merged":
        assert {cards[old].status, cards[new].status} == {"active", "superseded"}
    elif expect == "superseded":
        assert cards[old].status == "superseded" and cards[old].superseded_by == new
        assert cards[new].status == "active" and report.superseded == 1
        with Session(engine) as s:
            reasons = [v.reason for v in s.execute(select(CardVersion)).scalars()]
        assert any("contradicted by the newer card" in r for r in reasons)
    else:
        assert cards[old].status == cards[new].status == "active"
        assert cards[old].version == cards[new].version == 1
        assert report.unjudged == (0 if "refines" in answer else 1)
    assert again.absorbed == again.superseded == 0


def test_merge_combines_runs_not_confidences(engine):
    """Two one-run cards of 0.55 and 0.595 once merged to 0.82 (1 - prod(1 - c)); the merge
    now rests on the two runs behind them, and runs that failed confirm no recovery."""
    pre = ['last_tool == "pay"', 'last_error == "declined"']
    a = _card(engine, scenario="pay declined", pre=pre, tools=["pay"], confidence=0.45,
              outcome="failure")  # fmt: skip
    b = _card(engine, scenario="pay declined", pre=list(reversed(pre)), tools=["pay"],
              confidence=0.45, outcome="failure")  # fmt: skip
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    assert report.merges == 1
    merged = [c for c in _statuses(engine).values() if c.card_id in (a, b) and c.status == "active"]
    assert len(merged) == 1 and merged[0].confidence == pytest.approx(0.45)  # still unconfirmed
    c = _card(engine, scenario="pay declined", pre=pre, tools=["pay"], confidence=2 / 3)
    consolidate(engine=engine, namespace="ns", rules=RULES)
    (survivor,) = [x for x in _statuses(engine).values() if x.status == "active"]
    assert survivor.card_id == merged[0].card_id
    # three runs support it and one succeeded: Beta(1+3, 1) = 0.8, less the survivor's offset 0
    assert survivor.confidence == pytest.approx(0.8) and c != survivor.card_id
