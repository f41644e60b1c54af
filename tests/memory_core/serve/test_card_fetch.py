"""A full load reads the cards through the driver (serve/card_fetch.py): every card as the
ORM's types read it, whatever its values."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import DBAPIError
from sqlmodel import col

from memory_core.db import read_session, session_scope
from memory_core.models.card import Card
from memory_core.serve.card_fetch import SEEN_TIMES, active_entries, sqlite_time, sqlite_uuid
from memory_core.serve.card_rows import LoadMemo, _json, entry_of
from memory_core.serve.changes import COLUMNS
from memory_core.serve.snapshot import load_snapshot
from memory_core.serve.snapshot_cache import SnapshotCache
from tests.helpers.serve import add_card
from tests.memory_core.serve.test_serve_snapshot import _edit, _served

NS = "fetched"

FIELDS = (
    "card_id", "kind", "confidence", "seen_at", "use_count", "evidence_count", "compiled",
    "scenario", "rest", "broken", "trust", "pinned", "version", "updated_at", "run_count",
)  # fmt: skip


def _as_orm_reads(engine) -> dict[uuid.UUID, tuple]:
    with read_session(engine) as session:
        # the ORM's own types: ids, UTC timestamps and JSON as SQLAlchemy and the driver read them
        rows = session.execute(
            select(*COLUMNS).where(col(Card.namespace) == NS, col(Card.status) == "active")
        ).all()
    entries = [entry_of(r, LoadMemo()) for r in rows]
    return {e.card_id: tuple(getattr(e, f) for f in FIELDS) for e in entries}


def test_the_driver_path_reads_every_card_as_the_orm_does(engine) -> None:
    cards = [
        add_card(engine, namespace=NS, scenario=f"card {i}", preconditions=[f"retry_count >= {i}"])
        for i in range(5)
    ]
    add_card(engine, namespace=NS, scenario="archived", status="archived")
    add_card(engine, namespace="elsewhere", scenario="another namespace")
    used = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)  # whole seconds: no fraction stored
    with session_scope(engine) as session:
        for card, changes in zip(
            cards,
            [
                {"last_used_at": used, "use_count": 4, "pinned": True},
                {"last_used_at": used + timedelta(microseconds=7), "value": "worth it"},
                {"confidence": 0.123456789, "version": 3, "run_count": 2},
                {
                    "provenance": {"producer": "agent", "origin": "web"},
                    # past a double's range: orjson refuses it, the json module reads it
                    "action_sequence": [{"tool": "pay", "note": "in cents", "n": 10**400}],
                },
                {"preconditions": ["this is ( not cel"]},  # compiles on use, never holds
            ],
            strict=True,
        ):
            session.execute(update(Card).where(col(Card.card_id) == card.card_id).values(changes))
    with read_session(engine) as session:
        fetched = active_entries(session=session, namespace=NS)
    got = {i: tuple(getattr(e, f) for f in FIELDS) for i, e in fetched.items()}
    assert got == _as_orm_reads(engine)
    assert set(got) == {c.card_id for c in cards}
    for e in fetched.values():
        assert type(e.card_id) is uuid.UUID and e.seen_at.tzinfo is not None
        assert e.seen_at.utcoffset() == timedelta(0)
    snap = load_snapshot(engine=engine, namespace=NS)
    assert set(snap.entries) == set(got)


def test_sqlite_values_read_as_sqlalchemy_reads_them() -> None:
    u = uuid.uuid4()
    made = sqlite_uuid(u.hex)
    assert made == u and hash(made) == hash(u) and str(made) == str(u)
    assert made.is_safe == u.is_safe == uuid.SafeUUID.unknown
    assert sqlite_uuid(str(u)) == u  # dashed, as some tools write it
    assert sqlite_uuid(u) is u
    with pytest.raises(ValueError):
        sqlite_uuid("not an id")
    seen: dict[str, datetime] = {}
    when = sqlite_time("2026-12-06 21:48:15.815949", seen)
    assert when == datetime(2026, 12, 6, 21, 48, 15, 815949, tzinfo=UTC)
    assert sqlite_time("2026-12-06 21:48:15.815949", seen) is when  # parsed once per text
    assert sqlite_time("2026-12-06 23:48:15+02:00", seen) == datetime(
        2026, 12, 6, 21, 48, 15, tzinfo=UTC
    )
    assert sqlite_time(None, seen) is None
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(SEEN_TIMES + 10):  # distinct texts: what is remembered stays bounded
        at = start + timedelta(seconds=i)
        assert sqlite_time(at.replace(tzinfo=None).isoformat(" "), seen) == at
        assert len(seen) <= SEEN_TIMES


def test_json_orjson_refuses_is_read_by_the_json_module() -> None:
    assert _json('[{"n": 1e400}]') == [{"n": float("inf")}]
    assert _json("[NaN]")[0] != _json("[NaN]")[0]  # NaN, as the json module reads it
    assert _json('{"a": [1, "b"]}') == {"a": [1, "b"]}
    assert _json([1]) == [1]  # parsed by the driver already


def test_a_row_hindsight_did_not_write_is_held_broken_and_the_rest_is_served(
    engine, caplog
) -> None:
    """A hand edit or another tool left a card whose lists are of the wrong shape (both
    databases) or, on SQLite, whose JSON does not parse: that card is never served, its
    namespace still loads, and a feed batch holding it is applied whole."""
    good = add_card(engine, namespace=NS, scenario="good", preconditions=['tool == "t"'])
    odd = add_card(engine, namespace=NS, scenario="odd shape", preconditions=['tool == "t"'])
    _edit(engine, odd.card_id, failure_modes=["a mode as a bare string"])
    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    with caplog.at_level(logging.WARNING, logger="memory_core.serve.card_rows"):
        assert _served(cache, NS, {"tool": "t"}) == {"good"}
    assert f"card {odd.card_id} is not served" in caplog.text
    # a later change: the odd card fixed, the good one broken, in one feed batch
    _edit(engine, odd.card_id, failure_modes=[{"mode": "fixed", "handling": "retry"}])
    _edit(engine, good.card_id, action_sequence=[7])
    assert _served(cache, NS, {"tool": "t"}) == {"odd shape"}
    assert cache.reloads == 0
    if engine.dialect.name != "sqlite":
        return
    # text no JSON parser reads, written past the ORM (in a column no index reads: the first
    # tool's expression index makes SQLite refuse it in action_sequence)
    with session_scope(engine) as s:
        s.execute(
            text("UPDATE card SET failure_modes = '[{\"mode\": ' WHERE card_id = :id"),
            {"id": odd.card_id.hex},
        )
    fresh = load_snapshot(engine=engine, namespace=NS)
    assert {e.scenario: e.broken for e in fresh.entries.values()} == {
        "good": True,
        "odd shape": True,
    }


def test_a_database_error_while_reading_is_raised_as_sqlalchemy_raises_it(engine) -> None:
    """Callers tell a database that is down or locked by SQLAlchemyError, whichever path read
    the cards: the driver's own error is not let through."""
    add_card(engine, namespace=NS, scenario="a card")
    with session_scope(engine) as s:  # the table gone from under the reader
        s.execute(text("ALTER TABLE card RENAME TO card_elsewhere"))
    try:
        with pytest.raises(DBAPIError, match="card"):
            load_snapshot(engine=engine, namespace=NS)
    finally:
        with session_scope(engine) as s:
            s.execute(text("ALTER TABLE card_elsewhere RENAME TO card"))
