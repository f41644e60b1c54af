"""The holdout and the estimate: arms recorded per card, reproducible, pinned cards always
served, outcomes counted for both arms, the interval against published values."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select
from sqlmodel import Session

from memory_core.effects.estimate import Verdict, estimate, newcombe, wilson
from memory_core.effects.fdr import namespace_tests
from memory_core.effects.holdout import withheld
from memory_core.models.card import Card, CardUse, CardVersion
from memory_core.serve.keys import create_key
from memory_core.serve.schemas import FeedbackRequest, OutcomeRequest, QueryRequest
from memory_core.serve.service import MemoryService
from memory_core.settings import EffectRules, Settings
from tests.helpers.serve import add_card

STATE = {"tool": "search"}


def _service(engine, rate: float = 0.5, seed: str = "s1") -> MemoryService:
    return MemoryService(engine=engine, settings=Settings(holdout={"rate": rate, "seed": seed}))


def _who(engine, svc: MemoryService, scopes=("read",)):
    return svc.authenticate(create_key(engine=engine, namespace="team-a", scopes=list(scopes))[1])


def _cards(engine, n: int) -> list[uuid.UUID]:
    return [
        add_card(
            engine, scenario=f"card {i}", preconditions=['tool == "search"'], confidence=0.7
        ).card_id
        for i in range(n)
    ]


def _uses(engine) -> list[CardUse]:
    with Session(engine) as s:
        return list(s.execute(select(CardUse).order_by(CardUse.used_at)).scalars())


def test_wilson_and_newcombe_match_published_values() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, table II, method 10, 95%
    d, low, high = newcombe(k1=56, n1=70, k2=48, n2=80, z=1.959964)
    assert (round(d, 4), round(low, 4), round(high, 4)) == (0.2, 0.0524, 0.3339)
    d, low, high = newcombe(k1=9, n1=10, k2=3, n2=10, z=1.959964)
    assert (round(low, 4), round(high, 4)) == (0.1705, 0.809)
    # Wilson by hand: p=0.4, n=10, z=1.96 -> (0.1682, 0.6873)
    lo, hi = wilson(successes=4, n=10, z=1.959964)
    assert (round(lo, 4), round(hi, 4)) == (0.1682, 0.6873)


def test_verdicts() -> None:
    counts = {
        "served_uses": 100,
        "served_successes": 40,
        "withheld_uses": 40,
        "withheld_successes": 28,
    }
    harms = estimate(**counts, rules=EffectRules(fdr=0))  # the card's own interval alone
    assert harms.verdict is Verdict.harms and harms.high is not None and harms.high < 0
    assert harms.difference == pytest.approx(-0.3)
    # by default harms is the namespace's test (memory_core.effects.fdr), which must say so
    assert estimate(**counts).verdict is Verdict.unclear
    (test,) = namespace_tests([(40, 100, 28, 40)], rules=EffectRules())
    assert test is not None and test.harms
    judged = estimate(**counts, harms=test)
    assert judged.verdict is Verdict.harms and judged.harms_test == test
    helps = estimate(served_uses=100, served_successes=80, withheld_uses=40, withheld_successes=12)
    assert helps.verdict is Verdict.helps
    null = estimate(
        served_uses=4000, served_successes=2000, withheld_uses=4000, withheld_successes=2000
    )
    assert null.verdict is Verdict.no_effect
    few = estimate(served_uses=100, served_successes=10, withheld_uses=5, withheld_successes=5)
    assert few.verdict is Verdict.unclear and few.label == "no measurable effect yet"
    none = estimate(served_uses=0, served_successes=0, withheld_uses=0, withheld_successes=0)
    assert none.difference is None and none.verdict is Verdict.unclear


def test_every_matching_card_gets_an_arm_and_the_same_seed_gives_the_same_arms(engine) -> None:
    ids = set(_cards(engine, 6))
    svc = _service(engine)
    who = _who(engine, svc)
    served_per_query = []
    for i in range(8):
        res = svc.query(
            principal=who, request=QueryRequest(task_state=STATE, top_k=10, run_id=f"run-{i}")
        )
        served_per_query.append({h.card.card_id for h in res.cards})
    svc.uses.flush()
    uses = _uses(engine)
    by_query: dict[uuid.UUID, dict[uuid.UUID, str]] = {}
    for u in uses:
        assert u.query_id is not None and u.arm in ("served", "withheld")
        by_query.setdefault(u.query_id, {})[u.card_id] = u.arm
    assert len(by_query) == 8
    arms = list(by_query.values())
    for served, arm in zip(served_per_query, arms, strict=True):
        assert set(arm) == ids  # every matching card: one row, served or withheld
        assert {c for c, a in arm.items() if a == "served"} == served
    assert any("withheld" in a.values() for a in arms)  # at rate 0.5, some are
    # the arms follow the hash of (seed, run id, card)
    for i, arm in enumerate(arms):
        for cid, a in arm.items():
            out = withheld(seed="s1", key=f"run-{i}", card_id=cid, rate=0.5)
            assert a == ("withheld" if out else "served")
    # the same seed and run again: the same arms; use_count counts the served only
    again = _service(engine)
    res = again.query(
        principal=who, request=QueryRequest(task_state=STATE, top_k=10, run_id="run-3")
    )
    assert {h.card.card_id for h in res.cards} == served_per_query[3]
    again.uses.flush()
    with Session(engine) as s:
        counts = {c.card_id: c.use_count for c in s.execute(select(Card)).scalars()}
    for cid in ids:
        assert counts[cid] == sum(1 for a in arms if a[cid] == "served") + (
            cid in served_per_query[3]
        )


def test_rate_zero_withholds_nothing_and_pinned_cards_are_never_withheld(engine) -> None:
    ids = _cards(engine, 4)
    off = _service(engine, rate=0.0)
    who = _who(engine, off)
    for i in range(5):
        res = off.query(principal=who, request=QueryRequest(task_state=STATE, run_id=f"r{i}"))
        assert len(res.cards) == 4
    admin = _who(engine, off, ("admin",))
    for cid in ids[:2]:
        card = off.pin(principal=admin, card_id=cid, pinned=True)
        assert card.pinned
    svc = _service(engine, rate=0.5)
    for i in range(40):
        res = svc.query(principal=who, request=QueryRequest(task_state=STATE, run_id=f"p{i}"))
        served = {h.card.card_id for h in res.cards}
        assert set(ids[:2]) <= served
    svc.uses.flush()
    held = {u.card_id for u in _uses(engine) if u.arm == "withheld"}
    assert held and held <= set(ids[2:])
    with Session(engine) as s:
        (hist,) = s.execute(select(CardVersion).where(CardVersion.card_id == ids[0])).scalars()
    assert hist.reason.startswith("pinned") and hist.actor.startswith("key:")


def test_an_outcome_counts_for_the_served_and_the_withheld_arm(engine) -> None:
    ids = _cards(engine, 6)
    svc = _service(engine, rate=0.5)
    who = _who(engine, svc)
    # find a run that serves some and withholds some
    run = next(
        f"o{i}"
        for i in range(100)
        if 0 < sum(withheld(seed="s1", key=f"o{i}", card_id=c, rate=0.5) for c in ids) < 6
    )
    res = svc.query(principal=who, request=QueryRequest(task_state=STATE, top_k=10, run_id=run))
    served = [h for h in res.cards]
    first = served[0]
    fb = svc.feedback(
        principal=who,
        card_id=first.card.card_id,
        request=FeedbackRequest(outcome="failure", use_id=first.use_id),
    )
    assert fb.recorded
    with Session(engine) as s:
        cards = {c.card_id: c for c in s.execute(select(Card)).scalars()}
    held = [c for c in ids if c not in {h.card.card_id for h in served}]
    assert held
    for cid in held:
        assert (cards[cid].withheld_outcomes, cards[cid].withheld_successes) == (1, 0)
    assert cards[first.card.card_id].served_outcomes == 1
    # the query's outcome for the rest: served cards count once, withheld ones are not
    # counted twice
    out = svc.report_outcome(
        principal=who, query_id=res.query_id, request=OutcomeRequest(outcome="failure")
    )
    assert (out.served, out.withheld) == (len(served) - 1, 0)
    with Session(engine) as s:
        cards = {c.card_id: c for c in s.execute(select(Card)).scalars()}
    assert sum(c.served_outcomes for c in cards.values()) == len(served)
    assert sum(c.withheld_outcomes for c in cards.values()) == len(held)
    assert all(c.served_successes == c.withheld_successes == 0 for c in cards.values())
    # the card as the API shows it carries its effect
    shown = svc.get_card(principal=who, card_id=held[0])
    assert shown.effect is not None and shown.effect.withheld_uses == 1


def test_a_query_whose_only_card_was_withheld_still_takes_an_outcome(engine) -> None:
    (cid,) = _cards(engine, 1)
    svc = _service(engine, rate=0.5)
    who = _who(engine, svc)
    run = next(
        f"w{i}" for i in range(100) if withheld(seed="s1", key=f"w{i}", card_id=cid, rate=0.5)
    )
    res = svc.query(principal=who, request=QueryRequest(task_state=STATE, run_id=run))
    assert res.cards == [] and res.query_id is not None
    out = svc.report_outcome(
        principal=who, query_id=res.query_id, request=OutcomeRequest(outcome="success")
    )
    assert (out.served, out.withheld) == (0, 1)
    with Session(engine) as s:
        card = s.get(Card, cid)
        assert (card.withheld_outcomes, card.withheld_successes, card.use_count) == (1, 1, 0)
