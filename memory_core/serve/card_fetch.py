"""A namespace's active cards read for a full load: on SQLite through the driver's cursor,
its text values converted as SQLAlchemy's types would (ids, UTC timestamps), elsewhere
through Core. The ORM's row machinery cost ~1.1 s of a 100k-card load's ~3 s: raw sqlite3
hands over the same rows in ~0.2 s.

Layer: cards.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlmodel import col

from memory_core.models.card import Card, CardStatus
from memory_core.models.columns import uuid_of_int
from memory_core.serve.card_rows import LoadMemo, Profile, entry_of, row_columns
from memory_core.serve.changes import COLUMNS
from memory_core.serve.entry import Entry

BATCH = 10_000  # rows in memory at a time: all at once were the load's peak of memory

# the positions _sqlite_rows converts: the id and the two timestamps
if [c.key for c in COLUMNS[:5]] != ["card_id", "kind", "confidence", "last_used_at", "updated_at"]:
    raise RuntimeError("changes.COLUMNS no longer starts as card_fetch reads it")


def sqlite_uuid(value: Any) -> uuid.UUID:
    """The id SQLAlchemy's Uuid type reads from SQLite's 32 hex digits (built without the
    uuid module's argument checks: 1.5 us an id less); any other stored form as uuid reads it."""
    if type(value) is str and len(value) == 32:
        return uuid_of_int(int(value, 16))
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


SEEN_TIMES = 4096  # timestamp texts remembered at a time


def sqlite_time(value: Any, seen: dict[str, datetime]) -> datetime | None:
    """A stored timestamp as UTCDateTime reads it (aware, UTC), parsed once per text among the
    last few thousand (cards written together share theirs). Bounded: a million distinct texts
    held to the end of a load and freed at once would leave their memory as holes among the
    cards'."""
    if value is None:
        return None
    if (found := seen.get(value)) is None:
        if len(seen) >= SEEN_TIMES:
            seen.clear()
        parsed = datetime.fromisoformat(value)
        found = seen[value] = (
            parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        )
    return found


def _active(columns: tuple[Any, ...], namespace: str) -> Any:
    return select(*columns).where(
        col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value
    )


def _sqlite_rows(session: Session, namespace: str) -> Iterator[tuple[Any, ...]]:
    compiled = _active(COLUMNS, namespace).compile(dialect=session.get_bind().dialect)
    params = tuple(compiled.params[k] for k in compiled.positiontup or ())
    # the session's own connection: the same read transaction as the feed's watermark
    cursor = session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]
    seen: dict[str, datetime] = {}
    try:
        cursor.execute(str(compiled), params)
        while rows := cursor.fetchmany(BATCH):
            for r in rows:
                at, updated = sqlite_time(r[3], seen), sqlite_time(r[4], seen)
                yield (sqlite_uuid(r[0]), r[1], r[2], at, updated, *r[5:])
    except sqlite3.Error as exc:
        # as SQLAlchemy raises it (OperationalError, ...): callers catch SQLAlchemyError for
        # a database that is down or locked, whichever path read it
        raise DBAPIError.instance(str(compiled), params, exc, sqlite3.Error) from exc
    finally:
        cursor.close()


def _core_rows(session: Session, namespace: str) -> Iterator[Any]:
    query = _active(row_columns(), namespace)
    # Core, not the ORM's row loading; in batches (a server-side cursor on PostgreSQL)
    result = session.connection().execution_options(yield_per=BATCH).execute(query)
    for rows in result.partitions(BATCH):
        yield from rows


def active_entries(
    *, session: Session, namespace: str, profiles: dict[uuid.UUID, Profile] | None = None
) -> dict[uuid.UUID, Entry]:
    """Every active card of the namespace as retrieval needs it, by id (the profiles of the
    tool's reminders put in `profiles`)."""
    rows = _sqlite_rows if session.get_bind().dialect.name == "sqlite" else _core_rows
    memo = LoadMemo()
    entries: dict[uuid.UUID, Entry] = {}
    for r in rows(session, namespace):
        e = entry_of(r, memo, profiles)
        entries[e.card_id] = e
    return entries
