"""A restored snapshot's use counts brought current: a use writes no change-feed entry, so
the cards used since the file are read again, and every card's uses when the sums still
differ (a use queued long before the file).

Layer: snapshot.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.db import read_session
from memory_core.models.card import Card, CardStatus
from memory_core.serve.snapshot import Snapshot, touched


def uses_current(engine: Engine, snap: Snapshot, *, db_uses: int, since: Any) -> int:
    """Bring the snapshot's uses to the database's (db_uses: their sum there; since: the
    file header's uses_since); returns how many cards changed."""
    if _use_sum(snap) == db_uses:
        return 0
    behind = _read_uses(engine, snap, since=_since(since))  # the cards used lately first
    if _use_sum(snap) != _db_use_sum(engine, snap.namespace):  # one used long before: all
        behind += _read_uses(engine, snap, since=None)
    return behind


def _since(value: Any) -> datetime | None:
    """The header's uses_since (None: read every card's uses)."""
    try:
        found = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return found if found is not None and found.tzinfo is not None else None


def _use_sum(snap: Snapshot) -> int:
    return sum(e.use_count for e in snap.entries.values())


def _db_use_sum(engine: Engine, namespace: str) -> int:
    with read_session(engine) as session:
        return int(
            session.execute(
                select(func.sum(col(Card.use_count))).where(
                    col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value
                )
            ).scalar()
            or 0
        )


def _read_uses(engine: Engine, snap: Snapshot, *, since: datetime | None) -> int:
    """Use counts and last uses as the database has them (a use writes no feed entry): of the
    cards last used at or after `since`, or of every card (a million rows cost ~6 s); returns
    how many changed."""
    entries, changed = snap.entries, 0
    where = [col(Card.namespace) == snap.namespace, col(Card.status) == CardStatus.active.value]
    if since is not None:
        where.append(col(Card.last_used_at) >= since)
    with read_session(engine) as session:
        result = session.execute(
            select(col(Card.card_id), col(Card.use_count), col(Card.last_used_at)).where(*where),
            execution_options={"yield_per": 10_000},
        )
        for rows in result.partitions(10_000):
            for card_id, uses, last in rows:
                e = entries.get(card_id)
                if e is not None and e.use_count != uses:
                    e.use_count, e.seen_at = uses, last or e.updated_at or e.seen_at
                    touched(e)  # its key in a saved order is now too low: moved by a fold
                    changed += 1
    return changed
