"""The decay stage (time decay, the unused archive, the cap), with a frozen clock, on SQLite
and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import event, select
from sqlmodel import Session

from memory_core.cards.score import ranking_terms
from memory_core.db import session_scope
from memory_core.decay import DecayParams, list_archive, record_feedback
from memory_core.models.card import Card, CardVersion
from memory_core.serve.uses import UseRecorder
from memory_core.settings import DecayRules, DecayTier
from tests.helpers.decay import (
    NOW,
    W,
    card_row,
    cards_by_id,
    decay_at,
    dump_state,
    insert_cards,
)
from tests.helpers.serve import served_cards


def test_time_decay_applies_each_tier_once(engine) -> None:
    fresh, t1, t1_done, t2, t2_from_1, used, restored, review, other_ns = insert_cards(
        engine,
        [
            card_row(29.9),
            card_row(30),  # exactly 30 days: tier 1
            card_row(45, decay_tier=1),  # tier 1 already applied
            card_row(95),  # both tiers at once
            card_row(95, decay_tier=1, confidence=0.5),
            card_row(200, last_used_at=NOW - timedelta(days=5)),  # the last use counts
            card_row(200, restored_at=NOW - timedelta(days=5)),  # a restore restarts the clock
            card_row(200, status="review"),  # only active cards fade
            card_row(40, namespace="other"),
        ],
    )
    report = decay_at(engine, namespace="default", archive_after_days=365)
    assert report.counts == {"decay": 3, "unused": 0, "harms": 0, "fade": 0, "cap": 0}
    cards = cards_by_id(engine)
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

    before = dump_state(engine)
    again = decay_at(engine, namespace="default", archive_after_days=365)
    assert again.total == 0 and dump_state(engine) == before


def test_three_tiers_from_the_settings_shape() -> None:
    with pytest.raises(ValueError, match="ascending"):
        DecayRules(
            tiers=[DecayTier(after_days=90, factor=0.7), DecayTier(after_days=30, factor=0.9)]
        )
    with pytest.raises(ValueError, match="timezone"):
        DecayParams(now=datetime(2026, 1, 1))


def test_unused_cards_move_to_the_archive_out_of_retrieval(engine) -> None:
    keep, old, very_old = insert_cards(
        engine, [card_row(89), card_row(90), card_row(400, decay_tier=2)]
    )
    report = decay_at(engine)
    assert report.counts == {"decay": 2, "unused": 2, "harms": 0, "fade": 0, "cap": 0}
    cards = cards_by_id(engine)
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
    found = served_cards(engine, state={})
    assert [(v, a) for v, a, _ in hist] == [(2, "decay")]
    assert "tiers 1-2" in hist[0][2] and "unused 90+ days" in hist[0][2]
    assert snap["status"] == "archived" and snap["confidence_before"] == 0.8
    assert [c.card_id for c in found] == [keep]
    entries = list_archive(engine=engine, namespace="default")
    assert {e.card_id for e in entries} == {old, very_old}
    assert {e.reason for e in entries} == {"unused"} and entries[0].archived_at == NOW
    assert decay_at(engine).total == 0


def test_cap_evicts_the_lowest_retrieval_scores_per_namespace(engine) -> None:
    rows = [
        card_row(
            idle_days=3 + i,
            confidence=0.3 + 0.05 * (i % 7),
            use_count=(i * 7) % 5,
            last_used_at=NOW - timedelta(days=i % 4, hours=i) if i % 3 else None,
            evidence_count=1 + i % 2,
        )
        for i in range(12)
    ]
    rows.append(card_row(2, use_count=9, decay_tier=0, confidence=0.2))
    rows.append(card_row(40, confidence=0.95))  # fades first, is ranked at its new confidence
    others = [card_row(1, namespace="other", confidence=0.1) for _ in range(3)]
    insert_cards(engine, rows + others)
    # the retrieval score, in Python, of the cards as the cap sees them: after time decay
    cards = [c for c in cards_by_id(engine).values() if c.namespace == "default"]
    for c in cards:
        c.confidence *= 0.9 if c.confidence == 0.95 else 1
    max_uses = max(c.use_count for c in cards)
    scores = {
        c.card_id: ranking_terms(
            confidence=c.confidence,
            seen_at=c.last_used_at or c.updated_at,
            use_count=c.use_count,
            now=NOW,
            max_uses=max_uses,
            w=W,
        ).score
        for c in cards
    }
    ranked = sorted(cards, key=lambda c: (-scores[c.card_id], -c.evidence_count, str(c.card_id)))

    report = decay_at(engine, cap=9)
    assert report.counts == {"decay": 1, "unused": 0, "harms": 0, "fade": 0, "cap": 5}
    cards = [c for c in cards_by_id(engine).values() if c.namespace == "default"]
    expected_out = {c.card_id for c in ranked[9:]}
    assert {c.card_id for c in cards if c.status == "archived"} == expected_out
    entries = list_archive(engine=engine, namespace="default")
    assert {e.reason for e in entries} == {"cap"}
    for e in entries:
        assert e.score == pytest.approx(scores[e.card_id])
    assert all(c["status"] == "active" for c in others)
    assert cards_by_id(engine)[others[0]["card_id"]].status == "active"  # 3 cards: under the cap
    assert decay_at(engine, cap=9).total == 0


def test_dry_run_writes_nothing_and_lists_exactly_what_apply_does(engine) -> None:
    insert_cards(
        engine,
        [card_row(d, confidence=0.4 + d / 1000) for d in (1, 20, 31, 50, 89, 91, 120, 300)]
        + [card_row(d, namespace="b") for d in (5, 95)],
    )
    before = dump_state(engine)
    plan = decay_at(engine, cap=3, dry_run=True)
    assert dump_state(engine) == before
    assert plan.dry_run and plan.counts == {
        "decay": 7,
        "unused": 4,
        "harms": 0,
        "fade": 0,
        "cap": 2,
    }
    assert len(plan.changes) == plan.total
    decay_at(engine, cap=3, dry_run=True)  # planning twice is fine: nothing was left behind

    applied = decay_at(engine, cap=3)
    assert applied.counts == plan.counts
    cards = cards_by_id(engine)
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
        insert_cards(engine, [card_row(10 + (i * 37) % 200, namespace=f"n{n}") for i in range(n)])
        seen: list[str] = []

        def hook(conn, cursor, statement, *args) -> None:
            seen.append(statement)

        event.listen(engine, "before_cursor_execute", hook)
        try:
            decay_at(engine, namespace=f"n{n}", cap=n // 3)
        finally:
            event.remove(engine, "before_cursor_execute", hook)
        return len(seen)

    assert count_statements(10) == count_statements(300)


def test_cards_changed_during_the_run_are_left_for_the_next_and_nothing_is_lost(engine) -> None:
    """A feedback, a use and new evidence landing between plan and apply: the run completes,
    applies the rest, and leaves those cards as the others wrote them (the next run plans
    them afresh)."""
    fed, used, cold, grown, quiet = insert_cards(
        engine, [card_row(40), card_row(40), card_row(200), card_row(40), card_row(40)]
    )
    plan_inserts: list[str] = []

    def write_meanwhile(conn, cursor, statement, *args) -> None:
        if not statement.startswith("INSERT INTO decay_plan"):
            return
        plan_inserts.append(statement)
        if len(plan_inserts) == 3:  # the last rule: every card read, nothing applied yet
            record_feedback(engine=engine, namespace="default", card_id=fed, outcome="success")
            recorder = UseRecorder(engine=engine)
            recorder.record(namespace="default", card_ids=[used, cold])
            assert recorder.flush() == 2
            with session_scope(engine) as s:  # retrospect adds evidence: confidence moves
                card = s.get(Card, grown)
                card.evidence_count, card.confidence = 2, 0.82

    event.listen(engine, "before_cursor_execute", write_meanwhile)
    try:
        report = decay_at(engine, archive_after_days=100)
    finally:
        event.remove(engine, "before_cursor_execute", write_meanwhile)
    assert report.skipped == 4
    assert report.skipped_ids == sorted([fed, used, cold, grown])  # named, in key order
    assert report.counts == {"decay": 1, "unused": 0, "harms": 0, "fade": 0, "cap": 0}
    cards = cards_by_id(engine)
    assert cards[quiet].confidence == pytest.approx(0.72) and cards[quiet].version == 2
    assert cards[fed].success_count == 1 and cards[fed].confidence == pytest.approx(0.85)
    # an outcome moves counters and writes no version; decay left the card alone
    assert cards[fed].decay_tier == 0 and cards[fed].version == 1
    for cid in (used, cold):
        assert cards[cid].use_count == 1 and cards[cid].decay_tier == 0
        assert cards[cid].status == "active" and cards[cid].version == 1
    assert cards[grown].confidence == pytest.approx(0.82) and cards[grown].version == 1
    with Session(engine) as s:
        history = s.execute(select(CardVersion.card_id).where(CardVersion.actor == "decay"))
        assert set(history.scalars()) == {quiet}
    # the next run plans the untouched-since card afresh: it still fades, once
    again = decay_at(engine, archive_after_days=100)
    assert again.skipped == 0 and again.skipped_ids == [] and again.counts["decay"] == 1
    assert cards_by_id(engine)[grown].confidence == pytest.approx(0.82 * 0.9)
