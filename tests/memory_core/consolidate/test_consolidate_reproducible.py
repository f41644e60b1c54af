"""Same input, same memory: two fresh runs on identical data give identical cards (compared
by content: card ids are random per run, and so is the moment each card was written)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col

from memory_core.consolidate.stage import consolidate
from memory_core.db import session_scope
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.card import Card, CardEvidence
from memory_core.models.trajectory import Trajectory
from memory_core.settings import ConsolidateRules
from memory_core.validate.stage import validate_drafts
from tests.helpers.data import tau_path
from tests.helpers.pipeline import retrospect_all

NOW = datetime(2026, 6, 1, 2, 0, tzinfo=UTC)


def _night(engine, namespace: str, records: list[tuple[str, Any]], batch_size: int) -> Any:
    ingest(engine=engine, records=records, namespace=namespace, task_type="default")
    retrospect_all(engine, batch_size=batch_size)
    validate_drafts(engine=engine, reports_dir=None, namespace=namespace)
    return consolidate(engine=engine, namespace=namespace, rules=ConsolidateRules())


def _content(engine, namespace: str) -> list[tuple[Any, ...]]:
    with Session(engine) as s:
        cards = s.execute(select(Card).where(col(Card.namespace) == namespace)).scalars()
        return sorted(
            (
                c.status,
                c.signature,
                c.scenario,
                repr(c.preconditions),
                repr(c.action_sequence),
                repr(c.failure_modes),
                round(c.confidence, 6),
                c.evidence_count,
                c.use_count,
            )
            for c in cards
        )


def test_two_runs_on_the_same_data_give_the_same_cards(engine) -> None:
    records = list(iter_sources([str(tau_path())]))
    # the same runs in other batches: cards are written at other moments (created_at) with
    # other random ids; neither may decide which card survives a merge, and the task contrast
    # sees each task's whole group whatever the batch (the group key is set at ingest)
    first = _night(engine, "night-a", records, batch_size=50)
    # and in another order: the runs that teach one lesson arrive in another order, so another
    # draft of it comes first
    second = _night(engine, "night-b", records[::-1], batch_size=7)
    # no two cards of this data are one lesson (cards warning of different errors never
    # merge); merge survivors are the next test's
    assert first.cards_seen == second.cards_seen > 0 and first.absorbed == second.absorbed
    a, b = _content(engine, "night-a"), _content(engine, "night-b")
    assert len(a) == len(b)
    differ = [x for x, y in zip(a, b, strict=True) if x != y]
    assert differ == [], f"{len(differ)} of {len(a)} cards differ"


def _write(engine, namespace: str, lessons: list[dict[str, Any]], order: list[int]) -> None:
    """Each lesson as its own card, written one worker transaction at a time in `order`
    (later writes get later created_at; ids are fresh uuid4s, as in a real run)."""
    for n, i in enumerate(order):
        lesson = lessons[i]
        with session_scope(engine) as s:
            t = Trajectory(
                namespace=namespace,
                key=f"run-{i}",
                content_hash=f"{i:064x}",
                source_format="steps",
                task_type="default",
            )
            s.add(t)
            s.flush()
            s.add(
                Card(
                    namespace=namespace,
                    kind="experience",
                    status="active",
                    confidence=0.6,
                    evidence_count=1,
                    created_at=NOW + timedelta(seconds=n),
                    updated_at=NOW + timedelta(seconds=n),
                    **lesson,
                )
            )
            s.flush()
            card_id = s.execute(
                select(col(Card.card_id)).where(
                    col(Card.namespace) == namespace, col(Card.signature) == lesson["signature"]
                )
            ).scalar_one()
            s.add(CardEvidence(card_id=card_id, trajectory_id=t.id, step=0))


def test_merge_survivors_do_not_depend_on_write_order_or_ids(engine) -> None:
    """Three wordings of one lesson (same preconditions and tools, equal evidence), written
    by workers in another order on the second night: the same card survives, with the same
    failure-mode handling: never the oldest write nor the lowest random id, which would
    make two nights on the same data differ."""
    lessons = [
        {
            "scenario": f"search flights, wording {w}",
            "preconditions": ['last_error == "429"'],
            "action_sequence": [{"tool": "search_flights", "params_template": {}, "note": w}],
            "failure_modes": [{"mode": "rate limited", "handling": f"back off ({w})"}],
            "signature": f"{w:0>40}",
        }
        for w in ("a", "b", "c")
    ]
    _write(engine, "night-a", lessons, [0, 1, 2])
    _write(engine, "night-b", lessons, [2, 1, 0])
    for ns in ("night-a", "night-b"):
        assert consolidate(engine=engine, namespace=ns, rules=ConsolidateRules()).absorbed == 2
    assert _content(engine, "night-a") == _content(engine, "night-b")
