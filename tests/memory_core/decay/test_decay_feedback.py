"""The archive's restore and outcome feedback, with a frozen clock, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlmodel import Session

from memory_core.decay import (
    DecayParams,
    list_archive,
    record_feedback,
    record_use,
    restore,
    run_decay,
)
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.card import CardUse, CardVersion
from tests.helpers.decay import NOW, W, card_row, cards_by_id, decay_at, insert_cards
from tests.helpers.serve import served_cards


def test_restore_brings_a_card_back_with_its_history(engine) -> None:
    (cid,) = insert_cards(engine, [card_row(120)])
    decay_at(engine)
    assert cards_by_id(engine)[cid].status == "archived"
    with pytest.raises(InvalidInput, match="not archived"):
        restore(
            engine=engine,
            namespace="default",
            card_id=insert_cards(engine, [card_row(1)])[0],
            actor="x",
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
    found = served_cards(engine, state={})
    assert [(v.version, v.actor) for v in hist] == [(2, "decay"), (3, "ana")]
    assert "restored from the archive" in hist[-1].reason and "unused" in hist[-1].reason
    assert cid in {c.card_id for c in found}
    assert list_archive(engine=engine, namespace="default") == []
    (entry,) = list_archive(engine=engine, namespace="default", include_restored=True)
    assert entry.restored_by == "ana" and entry.restored_at == NOW
    # the idle clock restarted: the next run the same day leaves it alone
    assert decay_at(engine).total == 0
    assert cards_by_id(engine)[cid].status == "active"


def test_restore_refuses_a_second_live_copy_of_the_same_lesson(engine) -> None:
    (old,) = insert_cards(engine, [card_row(120, signature="same")])
    decay_at(engine)
    insert_cards(engine, [card_row(1, signature="same")])  # retrospection learnt it again meanwhile
    with pytest.raises(InvalidInput, match="same lesson"):
        restore(engine=engine, namespace="default", card_id=old, actor="x")


def test_feedback_bounds_and_three_failures_in_a_row_send_to_review(engine) -> None:
    high, low, failing = insert_cards(
        engine,
        [card_row(1, confidence=0.98), card_row(1, confidence=0.05), card_row(1, confidence=0.9)],
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
    card = cards_by_id(engine)[failing]
    assert (card.use_count, card.success_count, card.failure_count) == (6, 1, 5)
    # outcomes are counters and the use log; only the move to review is a version
    assert card.last_used_at == NOW and card.version == 2
    with Session(engine) as s:
        last = s.execute(
            select(CardVersion).where(CardVersion.card_id == failing, CardVersion.version == 2)
        ).scalar_one()
        assert s.execute(select(CardVersion).where(CardVersion.card_id == high)).first() is None
        uses = s.execute(select(CardUse.outcome).where(CardUse.card_id == failing)).scalars()
        assert sorted(uses) == ["failure"] * 5 + ["success"]
    served = served_cards(engine, state={})
    assert served and failing not in {c.card_id for c in served}
    assert "3 failures in a row" in last.reason and last.snapshot["status"] == "review"

    with pytest.raises(InvalidInput, match="outcome"):
        record_feedback(engine=engine, namespace="default", card_id=high, outcome="meh")
    with pytest.raises(NotFound):
        record_feedback(engine=engine, namespace="default", card_id=uuid.uuid4(), outcome="success")


def test_feedback_on_a_served_use_and_a_use_makes_a_faded_card_eligible_again(engine) -> None:
    (cid,) = insert_cards(engine, [card_row(40)])
    assert decay_at(engine, archive_after_days=365).counts["decay"] == 1
    with Session(engine) as s:
        uses = record_use(session=s, namespace="default", card_ids=[cid], now=NOW)
        s.commit()
    card = cards_by_id(engine)[cid]
    assert card.decay_tier == 0 and card.last_used_at == NOW and card.use_count == 1

    fb = record_feedback(
        engine=engine, namespace="default", card_id=cid, outcome="success", use_id=uses[cid]
    )
    assert fb.recorded and cards_by_id(engine)[cid].use_count == 1  # the served use, not a new one
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
    assert later.counts["decay"] == 1 and cards_by_id(engine)[cid].decay_tier == 1
