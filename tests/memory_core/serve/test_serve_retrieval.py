"""Retrieval: atom index, explain verdicts, ranking, prompt block, batched uses, keys."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session

from memory_core.errors import Forbidden, InvalidPrecondition, Unauthorized
from memory_core.models.card import Card, CardUse
from memory_core.models.columns import utcnow
from memory_core.serve.atoms import equality_atoms
from memory_core.serve.keys import KeyRing, create_key, revoke_key
from memory_core.serve.prompt_block import prompt_block
from memory_core.serve.retrieval import retrieve
from memory_core.serve.schemas import QueryRequest
from memory_core.serve.service import MemoryService
from memory_core.serve.snapshot import load_snapshot
from memory_core.settings import RankingWeights
from tests.helpers.serve import add_card


def test_equality_atoms_only_from_top_level_conjuncts() -> None:
    assert equality_atoms('tool == "search"') == [("tool", ("s", "search"))]
    assert equality_atoms('last_tool == "a" && last_error_code == "429"') == [
        ("last_tool", ("s", "a")),
        ("last_error_code", ("s", "429")),
    ]
    assert equality_atoms('"x" == tool && retry_count == 2') == [
        ("tool", ("s", "x")),
        ("retry_count", ("i", 2)),
    ]
    assert equality_atoms('tool == "a" || tool == "b"') == []
    assert equality_atoms('(tool == "a" || x) && step == 1') == [("step", ("i", 1))]
    assert equality_atoms('tool == "a&&b"') == [("tool", ("s", "a&&b"))]
    assert equality_atoms("retry_count > 2") == []
    assert equality_atoms('x ? tool == "a" : true') == []


def test_index_narrows_candidates_and_explains_verdicts(engine) -> None:
    held = add_card(engine, scenario="held", preconditions=['tool == "search"'])
    failed = add_card(
        engine, scenario="failed", preconditions=['tool == "search"', "retry_count > 5"]
    )
    missing = add_card(
        engine, scenario="missing", preconditions=['tool == "search"', 'last_error == "x"']
    )
    for i in range(30):
        add_card(engine, scenario=f"other {i}", preconditions=[f'tool == "tool{i}"'])
    always = add_card(engine, scenario="always", preconditions=["retry_count >= 0"])
    snap = load_snapshot(engine=engine, namespace="team-a")
    state = {"tool": "SEARCH", "retry_count": 1.0}  # case and 1.0 normalised
    r = retrieve(snapshot=snap, state=state, now=utcnow(), top_k=10)
    assert {m.entry.card_id for m in r.matches} == {held.card_id, always.card_id}
    # keyed on their rarest atom: two on tool == "search", the third on last_error (absent
    # here, so never evaluated), plus the one without an equality atom
    assert r.candidates == 3
    r = retrieve(snapshot=snap, state=state, now=utcnow(), top_k=10, explain=True)
    misses = {m.entry.card_id: m.checks for m in r.near_misses}
    assert [c.verdict.value for c in misses[failed.card_id]] == ["held", "failed"]
    assert [c.verdict.value for c in misses[missing.card_id]] == ["held", "missing"]
    assert misses[missing.card_id][1].missing == ("last_error",)
    matched = {m.entry.card_id: m.checks for m in r.matches}
    assert [c.verdict.value for c in matched[held.card_id]] == ["held"]


def test_ranking_weights_and_text_blend(engine) -> None:
    low = add_card(engine, scenario="retry the payment", confidence=0.3, preconditions=[])
    high = add_card(engine, scenario="page smaller", confidence=0.9, preconditions=[])
    snap = load_snapshot(engine=engine, namespace="team-a")
    r = retrieve(snapshot=snap, state={}, now=utcnow())
    assert [m.entry.card_id for m in r.matches] == [high.card_id, low.card_id]
    assert r.matches[0].score.score == pytest.approx(0.4 * 0.9 + 0.3 * 1.0, abs=1e-3)
    r = retrieve(snapshot=snap, state={}, now=utcnow(), query="payment retry")
    assert r.matches[0].entry.card_id == low.card_id
    assert r.matches[0].score.text_similarity == 1.0
    # the one keyword matcher: stems, as fact search and recall match them
    r = retrieve(snapshot=snap, state={}, now=utcnow(), query="payments retried")
    assert r.matches[0].entry.card_id == low.card_id
    assert r.matches[0].score.text_similarity == 1.0


def test_the_lesson_keyed_on_the_call_ranks_before_the_tools_general_ones(engine) -> None:
    general = add_card(engine, scenario="general", confidence=0.75, preconditions=['tool == "pay"'])
    specific = add_card(
        engine,
        scenario="specific",
        confidence=0.67,
        preconditions=['tool == "pay"', 'args.method == "voucher"'],
    )
    strong = add_card(engine, scenario="strong", confidence=0.95, preconditions=['tool == "pay"'])
    snap = load_snapshot(engine=engine, namespace="team-a")
    r = retrieve(snapshot=snap, state={"tool": "pay", "args": {"method": "voucher"}}, now=utcnow())
    # what fails for calls like this one comes before what fails for the tool, even a
    # general reminder held with far more confidence (it fires on every call of the tool)
    assert [m.entry.card_id for m in r.matches] == [
        specific.card_id,
        strong.card_id,
        general.card_id,
    ]
    assert r.matches[0].score.specificity == 0.5 and r.matches[1].score.specificity == 0.0
    r = retrieve(snapshot=snap, state={"tool": "pay", "args": {"method": "card"}}, now=utcnow())
    assert [m.entry.card_id for m in r.matches] == [strong.card_id, general.card_id]


def test_prompt_block_respects_the_budget(engine) -> None:
    add_card(engine, scenario="when search answers 429", preconditions=[])
    svc = MemoryService(engine=engine, settings=_settings(engine))
    principal = _principal(engine, svc, ["read"])
    res = svc.query(principal=principal, request=QueryRequest(prompt_tokens=90))
    assert res.prompt is not None
    assert "when search answers 429" in res.prompt
    assert "Watch for (quoted as seen): \u201crate limited\u201d" in res.prompt
    assert len(res.prompt) <= 90 * 4
    short = prompt_block([res.cards[0].card], max_tokens=30)
    assert len(short) <= 30 * 4 and short.endswith("...")
    assert prompt_block([res.cards[0].card], max_tokens=16) == ""  # no room for any advice


def test_uses_are_batched_and_feedback_links_to_them(engine) -> None:
    card = add_card(engine, preconditions=['tool == "search"'])
    svc = MemoryService(engine=engine, settings=_settings(engine))
    principal = _principal(engine, svc, ["read"])
    res = svc.query(principal=principal, request=QueryRequest(task_state={"tool": "search"}))
    use_id = res.cards[0].use_id
    assert use_id is not None
    with Session(engine) as s:
        assert s.get(Card, card.card_id).use_count == 0  # not written yet: the read stays fast
    from memory_core.serve.schemas import FeedbackRequest

    fb = svc.feedback(
        principal=principal,
        card_id=card.card_id,
        request=FeedbackRequest(outcome="success", use_id=use_id),
    )
    assert fb.recorded and fb.confidence == pytest.approx(0.75)
    with Session(engine) as s:
        assert s.get(Card, card.card_id).use_count == 1
        assert s.get(CardUse, use_id).outcome == "success"
    svc.close()


def test_keys_hash_only_scope_and_revocation(engine) -> None:
    key, secret = create_key(engine=engine, namespace="team-a", scopes=["read"])
    assert secret not in key.key_hash and key.key_hash != secret
    ring = KeyRing(engine=engine, cache_s=0)
    p = ring.verify(secret)
    assert p.namespace == "team-a" and p.allows("read") and not p.allows("write")
    with pytest.raises(Forbidden):
        p.require("write")
    with pytest.raises(Unauthorized):
        ring.verify("hs_wrong")
    with pytest.raises(Unauthorized):
        ring.verify(None)
    revoke_key(engine=engine, key_id=key.id)
    with pytest.raises(Unauthorized):
        ring.verify(secret)


def test_broken_stored_precondition_is_never_served(engine) -> None:
    card = add_card(engine, preconditions=[])
    with Session(engine) as s:
        c = s.get(Card, card.card_id)
        c.preconditions = ["tool =="]
        s.add(c)
        s.commit()
    snap = load_snapshot(engine=engine, namespace="team-a")
    assert retrieve(snapshot=snap, state={}, now=utcnow()).matches == []
    # compiled on first use: with the variable present it is evaluated, fails, is explained
    r = retrieve(snapshot=snap, state={"tool": "a"}, now=utcnow(), explain=True)
    assert r.matches == []
    [miss] = r.near_misses
    assert miss.checks[0].verdict.value == "error" and "compile" in miss.checks[0].detail
    with pytest.raises(InvalidPrecondition):
        add_card(engine, preconditions=["tool =="])


def test_served_rows_are_read_once_and_follow_uses_and_feedback(engine) -> None:
    card = add_card(engine, preconditions=['tool == "search"'], use_count=3)
    svc = MemoryService(engine=engine, settings=_settings(engine))
    principal = _principal(engine, svc, ["read"])
    plain = QueryRequest(task_state={"tool": "search"}, record_use=False)
    # the lean answer of the HTTP route is the model's answer, field for field
    lean = json.loads(svc.query_json(principal=principal, request=plain))
    full = svc.query(principal=principal, request=plain).model_dump(mode="json")
    for answer in (lean, full):  # recency moves with the clock
        score = answer["cards"][0]["score"]
        score["recency"], score["score"] = round(score["recency"], 5), round(score["score"], 5)
    assert lean == full
    assert lean["cards"][0]["card"]["use_count"] == 3
    reads = []
    svc.rows._active = lambda ns, ids: reads.append(ids) or {}  # type: ignore[method-assign]
    used = json.loads(
        svc.query_json(principal=principal, request=QueryRequest(task_state={"tool": "search"}))
    )
    assert reads == []  # served from the snapshot's rows
    assert used["cards"][0]["card"]["use_count"] == 3  # as it was before this use
    again = svc.query(principal=principal, request=plain)
    assert again.cards[0].card.use_count == 4 and again.cards[0].card.last_used_at is not None
    del svc.rows._active
    from memory_core.serve.schemas import FeedbackRequest

    svc.feedback(  # a read key reports the outcome of the use it was served
        principal=principal,
        card_id=card.card_id,
        request=FeedbackRequest(outcome="failure", use_id=used["cards"][0]["use_id"]),
    )
    after = json.loads(svc.query_json(principal=principal, request=plain))["cards"][0]["card"]
    assert after["failure_count"] == 1 and after["confidence"] < card.confidence
    svc.close()


def _settings(engine):
    from memory_core.settings import Settings

    return Settings()


def _principal(engine, svc, scopes):
    return svc.authenticate(create_key(engine=engine, namespace="team-a", scopes=scopes)[1])


def test_near_equal_scores_are_ordered_by_evidence_then_content_never_by_id(engine) -> None:
    from datetime import timedelta

    from memory_core.serve.retrieval import TIE

    now = utcnow()
    cards = {
        name: add_card(engine, scenario=name, confidence=0.7, preconditions=['tool == "pay"'])
        for name in ("beta", "alpha", "older but better supported", "gamma")
    }
    with Session(engine) as s:
        for name, card in cards.items():
            row = s.get(Card, card.card_id)
            assert row is not None
            # written a few minutes apart, as batches of one nightly run are
            row.updated_at = now - timedelta(minutes=len(name))
            row.evidence_count = row.run_count = 5 if name.startswith("older") else 2
            s.add(row)
        s.commit()
    snap = load_snapshot(engine=engine, namespace="team-a")
    state = {"tool": "pay", "args": {}}
    r = retrieve(snapshot=snap, state=state, now=now, weights=RankingWeights(support=0.0))
    scores = [m.score.score for m in r.matches]
    assert max(scores) - min(scores) < TIE  # recency alone differs, and by very little
    assert [m.entry.scenario for m in r.matches] == [
        "older but better supported",
        "alpha",
        "beta",
        "gamma",
    ]
    # with the support term (default) the evidence is in the score itself, against the
    # best-supported card matching this state
    r = retrieve(snapshot=snap, state=state, now=now)
    assert [(m.entry.scenario, m.score.support) for m in r.matches][:2] == [
        ("older but better supported", 1.0),
        ("alpha", 0.4),
    ]
    gap = r.matches[0].score.score - r.matches[1].score.score
    assert gap == pytest.approx(RankingWeights().support * 0.6, abs=TIE)
