"""Reading the served cards and the change feed (migration 0013) from the database.

Layer: cards.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.models.card import Card, CardStatus
from memory_core.models.card_change import CardChange

Fingerprint = tuple[int, Any, int]
KEEP_CHANGES = 200_000  # the feed keeps this many rows; a snapshot further behind reloads
CHUNK = 500  # ids per IN (...) read

COLUMNS: tuple[Any, ...] = (
    Card.card_id,
    Card.kind,
    Card.confidence,
    Card.last_used_at,
    Card.updated_at,
    Card.use_count,
    Card.evidence_count,
    Card.run_count,
    Card.preconditions,
    Card.scenario,
    Card.action_sequence,
    Card.failure_modes,
    Card.value,
    Card.provenance,
    Card.pinned,
    Card.version,
)


def fingerprint(session: Session, namespace: str) -> Fingerprint:
    """What changes whenever the served set of a namespace changes (count, newest update,
    version sum of its active cards): the check behind the change feed."""
    row = session.execute(
        select(func.count(), func.max(col(Card.updated_at)), func.sum(col(Card.version))).where(
            col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value
        )
    ).one()
    return int(row[0]), row[1], int(row[2] or 0)


def last_seq(session: Session) -> int:
    """The newest change's number (0: none yet)."""
    return int(session.execute(select(func.max(col(CardChange.seq)))).scalar() or 0)


def first_seq(session: Session) -> int:
    """The oldest change kept (0: none)."""
    return int(session.execute(select(func.min(col(CardChange.seq)))).scalar() or 0)


def active_rows(session: Session, namespace: str) -> Sequence[Any]:
    """Every active card of a namespace, the columns a snapshot needs."""
    return session.execute(
        select(*COLUMNS).where(
            col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value
        )
    ).all()


def rows_by_id(session: Session, namespace: str, ids: Sequence[uuid.UUID]) -> list[Any]:
    """The active cards among these ids (a changed card no longer active is absent)."""
    out: list[Any] = []
    for start in range(0, len(ids), CHUNK):
        # by primary key alone: SQLite would pick the (namespace, status) index and scan
        rows = session.execute(
            select(*COLUMNS, col(Card.namespace), col(Card.status)).where(
                col(Card.card_id).in_(list(ids[start : start + CHUNK]))
            )
        ).all()
        active = CardStatus.active.value
        out.extend(r for r in rows if r.namespace == namespace and r.status == active)
    return out


def prune(engine: Engine, *, keep: int = KEEP_CHANGES) -> int:
    """Drop all but the newest `keep` changes; returns how many were dropped."""
    with Session(engine) as session:
        newest = last_seq(session)
        if newest - first_seq(session) < 2 * keep:
            return 0
        result = session.connection().execute(
            delete(CardChange).where(col(CardChange.seq) <= newest - keep)
        )
        session.commit()
    return int(result.rowcount or 0)
