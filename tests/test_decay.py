"""The decay stage, outcome feedback and the archive, with a frozen clock, on SQLite and
PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, func, insert, select
from sqlmodel import Session

from memory_core.cards.query import query_cards, score_terms
from memory_core.decay import (
    DecayParams,
    list_archive,
    record_feedback,
    record_use,
    restore,
    run_decay,
)
from memory_core.errors import ConcurrentUpdate, InvalidInput, NotFound
from memory_core.models.card import Card, CardArchive, CardUse, CardVersion
from memory_core.settings import DecayRules, DecayTier, RankingWeights

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
W = RankingWeights()


def _card(idle_days: float | None = None, **kw) -> dict:
    """An active card created (and unused) idle_days before NOW."""
    at = NOW - timedelta(days=idle_days if idle_days is not None else 1)
    base = {
        "card_id": uuid.uuid4(),
        "namespace": "default",
        "kind": "experience",
        "scenario": f"idle {idle_days}",
        "preconditions": [],
        "action_sequence": [{"tool": "q", "params_template": {}, "note": ""}],
        "expected_outcome": "ok",
        "actual_outcome": "ok",
        "failure_modes": [],
        "confidence": 0.8,
        "status": "active",
        "signature": uuid.uuid4().hex,
        "provenance": {},
        "evidence_count": 1,
        "created_at": at,
        "updated_at": at,
        "use_count": 0,
        "success_count": 0,
        "failure_count": 0,
        "consecutive_failures": 0,
        "version": 1,
    }
    base.update(kw)
    return base


def _insert(engine, rows: list[dict]) -> list[uuid.UUID]:
    with Session(engine) as s:
        s.execute(insert(Card), rows)
        s.commit()
    return [r["card_id"] for r in rows]


def _cards(engine) -> dict[uuid.UUID, Card]:
    with Session(engine) as s:
        return {c.card_id: c for c in s.execute(select(Card)).scalars()}


def _dump(engine) -> tuple:
    """Everything the stage could write, for before/after comparisons."""
    with Session(engine) as s:
        cards = sorted(
            (str(c.card_id), c.status, c.confidence, c.decay_tier, c.version, c.updated_at)
            for c in s.execute(select(Card)).scalars()
        )
        versions = s.execute(select(func.count()).select_from(CardVersion)).scalar_one()
        archived = s.execute(select(func.count()).select_from(CardArchive)).scalar_one()
    return cards, versions, archived


def _params(**kw) -> DecayParams:
    return DecayParams(now=NOW, **kw)


def _decay(engine, namespace=None, **kw):
    return run_decay(engine=engine, params=_params(**kw), weights=W, namespace=namespace)


def test_time_decay_applies_each_tier_once(engine) -> None:
    fresh, t1, t1_done, t2, t2_from_1, used, restored, review, other_ns = _insert(
        engine,
        [
            _card(29.9),
            _card(30),  # exactly 30 days: tier 1
            _card(45, decay_tier=1),  # tier 1 already applied
            _card(95),  # both tiers at once
            _card(95, decay_tier=1, confidence=0.5),
            _card(200, last_used_at=NOW - timedelta(days=5)),  # the last use counts
            _card(200, restored_at=NOW - timedelta(days=5)),  # a restore restarts the clock
            _card(200, status="review"),  # only active cards fade
            _card(40, namespace="other"),
        ],
    )
    report = _decay(engine, namespace="default", archive_after_days=365)
    assert report.counts == {"decay": 3, "unused": 0, "cap": 0}
    cards = _cards(engine)
    assert cards[t1].confidence == pytest.approx(0.8 * 0.9) and cards[t1].decay_tier == 1
    assert cards[t2].confidence == pytest.approx(0.8 * 0.9 * 0.7) and cards[t2].decay_tier == 2
    assert cards[t2_from_1].confidence == pytest.approx(0.5 * 0.7)
    for cid in (fresh, t1_done, used, restored, review, other_ns):
        assert cards[cid].confidence == 0.8 and cards[cid].version == 1, cards[cid].scenario
    # decay is history: a version row per card, and updated_at (retrieval recency) unchanged
    assert cards[t2].version == 2 and cards[t2].updated_at == NOW - timedelta(days=95)
    with Session(engine) as s:
        v = s.execute(select(CardVersion).where(CardVersion.card_id == t2)).scalar_one()
    assert v.actor == "decay" and "tiers 1-2" in v.reason and v.version == 2
    assert v.snapshot["confidence"] == pytest.approx(0.504) and v.snapshot["decay_tier"] == 2

    before = _dump(engine)
    again = _decay(engine, namespace="default", archive_after_days=365)
    assert again.total == 0 and _dump(engine) == before


def test_three_tiers_from_the_settings_shape() -> None:
    with pytest.raises(ValueError, match="ascending"):
        DecayRules(
            tiers=[DecayTier(after_days=90, factor=0.7), DecayTier(after_days=30, factor=0.9)]
        )
    with pytest.raises(ValueError, match="timezone"):
        DecayParams(now=datetime(2026, 1, 1))


def test_unused_cards_move_to_the_archive_out_of_retrieval(engine) -> None:
    keep, old, very_old = _insert(engine, [_card(89), _card(90), _card(400, decay_tier=2)])
    report = _decay(engine)
    assert report.counts == {"decay": 2, "unused": 2, "cap": 0}
    cards = _cards(engine)
    assert cards[keep].status == "active" and cards[keep].decay_tier == 1
    assert cards[old].status == "archived" and cards[very_old].status == "archived"
    # faded and archived in one run: one new version whose history row says both
    assert cards[old].version == 2 and cards[old].confidence == pytest.approx(0.504)
    assert cards[very_old].version == 2 and cards[very_old].confidence == 0.8
    assert cards[old].updated_at == NOW and cards[keep].updated_at == NOW - timedelta(days=89)
    with Session(engine) as s:
        hist = s.execute(
            select(CardVersion.version, CardVersion.actor, CardVersion.reason)
            .where(CardVersion.card_id == old)
            .order_by(CardVersion.version)
        ).all()
        snap = s.execute(
            select(CardVersion.snapshot).where(CardVersion.card_id == old)
        ).scalar_one()
        found = query_cards(session=s, namespace="default", state={}, top_k=10)
    assert [(v, a) for v, a, _ in hist] == [(2, "decay")]
    assert "tiers 1-2" in hist[0][2] and "unused 90+ days" in hist[0][2]
    assert snap["status"] == "archived" and snap["confidence_before"] == 0.8
    assert [m.card.card_id for m in found] == [keep]
    entries = list_archive(engine=engine, namespace="default")
    assert {e.card_id for e in entries} == {old, very_old}
    assert {e.reason for e in entries} == {"unused"} and entries[0].archived_at == NOW
    assert _decay(engine).total == 0


def test_cap_evicts_the_lowest_retrieval_scores_per_namespace(engine) -> None:
    rows = [
        _card(
            idle_days=3 + i,
            confidence=0.3 + 0.05 * (i % 7),
            use_count=(i * 7) % 5,
            last_used_at=NOW - timedelta(days=i % 4, hours=i) if i % 3 else None,
            evidence_count=1 + i % 2,
        )
        for i in range(12)
    ]
    rows.append(_card(2, use_count=9, decay_tier=0, confidence=0.2))
    rows.append(_card(40, confidence=0.95))  # fades first, is ranked at its new confidence
    others = [_card(1, namespace="other", confidence=0.1) for _ in range(3)]
    _insert(engine, rows + others)
    # the retrieval score, in Python, of the cards as the cap sees them: after time decay
    cards = [c for c in _cards(engine).values() if c.namespace == "default"]
    for c in cards:
        c.confidence *= 0.9 if c.confidence == 0.95 else 1
    max_uses = max(c.use_count for c in cards)
    scores = {c.card_id: score_terms(c, now=NOW, max_uses=max_uses, w=W).score for c in cards}
    ranked = sorted(cards, key=lambda c: (-scores[c.card_id], -c.evidence_count, str(c.card_id)))

    report = _decay(engine, cap=9)
    assert report.counts == {"decay": 1, "unused": 0, "cap": 5}
    cards = [c for c in _cards(engine).values() if c.namespace == "default"]
    expected_out = {c.card_id for c in ranked[9:]}
    assert {c.card_id for c in cards if c.status == "archived"} == expected_out
    entries = list_archive(engine=engine, namespace="default")
    assert {e.reason for e in entries} == {"cap"}
    for e in entries:
        assert e.score == pytest.approx(scores[e.card_id])
    assert all(c["status"] == "active" for c in others)
    assert _cards(engine)[others[0]["card_id"]].status == "active"  # 3 cards: under the cap
    assert _decay(engine, cap=9).total == 0


def test_dry_run_writes_nothing_and_lists_exactly_what_apply_does(engine) -> None:
    _insert(
        engine,
        [_card(d, confidence=0.4 + d / 1000) for d in (1, 20, 31, 50, 89, 91, 120, 300)]
        + [_card(d, namespace="b") for d in (5, 95)],
    )
    before = _dump(engine)
    plan = _decay(engine, cap=3, dry_run=True)
    assert _dump(engine) == before
    assert plan.dry_run and plan.counts == {"decay": 7, "unused": 4, "cap": 2}
    assert len(plan.changes) == plan.total
    _decay(engine, cap=3, dry_run=True)  # planning twice is fine: nothing was left behind

    applied = _decay(engine, cap=3)
    assert applied.counts == plan.counts
    cards = _cards(engine)
    for ch in plan.changes:
        card = cards[ch.card_id]
        if ch.rule == "decay":
            assert card.confidence == pytest.approx(ch.confidence_after)
            assert card.decay_tier == ch.tier_after
        else:
            assert card.status == ch.status_after == "archived"
            assert card.confidence == pytest.approx(ch.confidence_after)
        assert card.version == 2  # one new version per changed card
    changed = {ch.card_id for ch in plan.changes}
    assert all(c.version == 1 for cid, c in cards.items() if cid not in changed)


def test_the_stage_is_a_fixed_number_of_statements_whatever_the_card_count(engine) -> None:
    def count_statements(n: int) -> int:
        _insert(engine, [_card(10 + (i * 37) % 200, namespace=f"n{n}") for i in range(n)])
        seen: list[str] = []

        def hook(conn, cursor, statement, *args) -> None:
            seen.append(statement)

        event.listen(engine, "before_cursor_execute", hook)
        try:
            _decay(engine, namespace=f"n{n}", cap=n // 3)
        finally:
            event.remove(engine, "before_cursor_execute", hook)
        return len(seen)

    assert count_statements(10) == count_statements(300)


def test_restore_brings_a_card_back_with_its_history(engine) -> None:
    (cid,) = _insert(engine, [_card(120)])
    _decay(engine)
    assert _cards(engine)[cid].status == "archived"
    with pytest.raises(InvalidInput, match="not archived"):
        restore(
            engine=engine, namespace="default", card_id=_insert(engine, [_card(1)])[0], actor="x"
        )
    with pytest.raises(NotFound):
        restore(engine=engine, namespace="other", card_id=cid, actor="x")

    card = restore(engine=engine, namespace="default", card_id=cid, actor="ana", now=NOW)
    assert card.status == "active" and card.version == 3 and card.decay_tier == 0
    with Session(engine) as s:
        hist = (
            s.execute(
                select(CardVersion).where(CardVersion.card_id == cid).order_by(CardVersion.version)
            )
            .scalars()
            .all()
        )
        found = query_cards(session=s, namespace="default", state={}, top_k=10)
    assert [(v.version, v.actor) for v in hist] == [(2, "decay"), (3, "ana")]
    assert "restored from the archive" in hist[-1].reason and "unused" in hist[-1].reason
    assert cid in {m.card.card_id for m in found}
    assert list_archive(engine=engine, namespace="default") == []
    (entry,) = list_archive(engine=engine, namespace="default", include_restored=True)
    assert entry.restored_by == "ana" and entry.restored_at == NOW
    # the idle clock restarted: the next run the same day leaves it alone
    assert _decay(engine).total == 0
    assert _cards(engine)[cid].status == "active"


def test_restore_refuses_a_second_live_copy_of_the_same_lesson(engine) -> None:
    (old,) = _insert(engine, [_card(120, signature="same")])
    _decay(engine)
    _insert(engine, [_card(1, signature="same")])  # retrospection learnt it again meanwhile
    with pytest.raises(InvalidInput, match="same lesson"):
        restore(engine=engine, namespace="default", card_id=old, actor="x")


def test_feedback_bounds_and_three_failures_in_a_row_send_to_review(engine) -> None:
    high, low, failing = _insert(
        engine, [_card(1, confidence=0.98), _card(1, confidence=0.05), _card(1, confidence=0.9)]
    )
    up = record_feedback(engine=engine, namespace="default", card_id=high, outcome="success")
    assert up.confidence == 1.0 and up.success_count == 1
    again = record_feedback(engine=engine, namespace="default", card_id=high, outcome="success")
    assert again.confidence == 1.0 and again.confidence_before == 1.0
    down = record_feedback(engine=engine, namespace="default", card_id=low, outcome="failure")
    assert down.confidence == 0.0 and down.failure_count == 1
    assert (
        record_feedback(
            engine=engine, namespace="default", card_id=low, outcome="failure"
        ).confidence
        == 0.0
    )

    results = [
        record_feedback(engine=engine, namespace="default", card_id=failing, outcome=o, now=NOW)
        for o in ("failure", "failure", "success", "failure", "failure", "failure")
    ]
    assert [r.consecutive_failures for r in results] == [1, 2, 0, 1, 2, 3]
    assert [r.status for r in results] == ["active"] * 5 + ["review"]
    assert results[-1].sent_to_review and not any(r.sent_to_review for r in results[:-1])
    assert results[-1].confidence == pytest.approx(0.9 - 0.1 * 5 + 0.05)
    card = _cards(engine)[failing]
    assert (card.use_count, card.success_count, card.failure_count) == (6, 1, 5)
    assert card.last_used_at == NOW and card.version == 7
    with Session(engine) as s:
        last = s.execute(
            select(CardVersion).where(CardVersion.card_id == failing, CardVersion.version == 7)
        ).scalar_one()
        uses = s.execute(select(CardUse.outcome).where(CardUse.card_id == failing)).scalars()
        assert sorted(uses) == ["failure"] * 5 + ["success"]
        assert query_cards(session=s, namespace="default", state={}, top_k=10)
        assert failing not in {
            m.card.card_id for m in query_cards(session=s, namespace="default", state={})
        }
    assert "3 failures in a row" in last.reason and last.snapshot["status"] == "review"

    with pytest.raises(InvalidInput, match="outcome"):
        record_feedback(engine=engine, namespace="default", card_id=high, outcome="meh")
    with pytest.raises(NotFound):
        record_feedback(engine=engine, namespace="default", card_id=uuid.uuid4(), outcome="success")


def test_feedback_on_a_served_use_and_a_use_makes_a_faded_card_eligible_again(engine) -> None:
    (cid,) = _insert(engine, [_card(40)])
    assert _decay(engine, archive_after_days=365).counts["decay"] == 1
    with Session(engine) as s:
        uses = record_use(session=s, namespace="default", card_ids=[cid], now=NOW)
        s.commit()
    card = _cards(engine)[cid]
    assert card.decay_tier == 0 and card.last_used_at == NOW and card.use_count == 1

    fb = record_feedback(
        engine=engine, namespace="default", card_id=cid, outcome="success", use_id=uses[cid]
    )
    assert fb.recorded and _cards(engine)[cid].use_count == 1  # the served use, not a new one
    repeat = record_feedback(
        engine=engine, namespace="default", card_id=cid, outcome="success", use_id=uses[cid]
    )
    assert not repeat.recorded and repeat.version == fb.version
    with pytest.raises(InvalidInput, match="already has the outcome"):
        record_feedback(
            engine=engine, namespace="default", card_id=cid, outcome="failure", use_id=uses[cid]
        )

    later = run_decay(
        engine=engine,
        params=DecayParams(now=NOW + timedelta(days=31), archive_after_days=365),
        weights=W,
    )
    assert later.counts["decay"] == 1 and _cards(engine)[cid].decay_tier == 1


def test_a_card_changed_during_the_run_fails_it_and_loses_nothing(engine) -> None:
    """On PostgreSQL the stage reads one snapshot; a feedback landing between plan and apply
    makes the run fail (safe to re-run) instead of overwriting the feedback."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite takes the write lock at BEGIN: nobody writes during the run")
    (cid,) = _insert(engine, [_card(40)])

    sent: list[bool] = []

    def feedback_first(conn, cursor, statement, *args) -> None:
        if statement.startswith("INSERT INTO card_version") and not sent:
            sent.append(True)
            record_feedback(engine=engine, namespace="default", card_id=cid, outcome="success")

    event.listen(engine, "before_cursor_execute", feedback_first)
    try:
        with pytest.raises(ConcurrentUpdate):
            _decay(engine, archive_after_days=365)
    finally:
        event.remove(engine, "before_cursor_execute", feedback_first)
    card = _cards(engine)[cid]
    assert card.success_count == 1 and card.confidence == pytest.approx(0.85)
    assert card.decay_tier == 0 and card.version == 2  # the feedback's version, nothing else
    assert _decay(engine, archive_after_days=365).total == 0  # just used: nothing to fade
