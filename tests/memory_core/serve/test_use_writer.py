"""The use writer (memory_core/serve/uses.py) writes what the ORM reads back as written, and
keeps its Python per row small: a query's shared values are converted once, not per use."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlmodel import select

from memory_core import db
from memory_core.models.card import Card, CardUse
from memory_core.models.columns import row_id, utcnow
from memory_core.serve.uses import MAX_PENDING, UseRecorder
from tests.helpers.serve import add_card


def test_rows_and_counts_read_back_as_queued(settings, engine) -> None:
    a, b, c = (add_card(engine, scenario=f"card {i}", use_count=i).card_id for i in range(3))
    rec = UseRecorder(engine=engine)
    t0 = utcnow()
    q1, q2 = row_id(), row_id()
    state = {"tool": "search", "n": 2, "skip": [1]}
    first = rec.record(namespace="team-a", card_ids=[a, b], state=state, now=t0, query_id=q1)
    later = t0 + timedelta(seconds=3)
    second = rec.record(namespace="team-a", card_ids=[a], withheld=[c], now=later, query_id=q2)
    assert rec.pending == 4
    assert rec.flush() == 4 and rec.written == 4 and rec.flush() == 0 and rec.pending == 0
    with db.read_session(engine) as s:
        uses = {(u.card_id, u.query_id): u for u in s.exec(select(CardUse)).all()}
        cards = {x.card_id: x for x in s.exec(select(Card)).all()}
    assert len(uses) == 4
    u = uses[(a, q1)]
    assert (u.id, u.namespace, u.used_at, u.arm, u.outcome) == (
        first[a],
        "team-a",
        t0,
        "served",
        None,
    )
    assert u.context == {"via": "api", "state": {"tool": "search", "n": 2}}
    assert uses[(b, q1)].id == first[b] and uses[(a, q2)].id == second[a]
    held = uses[(c, q2)]
    assert (held.id, held.arm, held.context, held.used_at) == (second[c], "withheld", {}, later)
    # served uses counted per card with the latest time; a withheld card is not used
    assert (cards[a].use_count, cards[a].last_used_at) == (2, later)
    assert (cards[b].use_count, cards[b].last_used_at) == (2, t0)
    assert (cards[c].use_count, cards[c].last_used_at) == (2, None)


def test_a_querys_context_is_serialized_once_not_per_use(settings, engine) -> None:
    ids = [add_card(engine, scenario=f"card {i}").card_id for i in range(5)]
    writer_engine = db.make_engine(settings)  # its own dialect: the serializer below is its
    calls = []

    def counting(value):
        calls.append(value)
        return json.dumps(value)

    writer_engine.dialect._json_serializer = counting  # type: ignore[attr-defined]
    try:
        rec = UseRecorder(engine=writer_engine)
        for q in range(3):
            state = {"tool": "search", "q": q}
            rec.record(namespace="team-a", card_ids=ids, state=state, query_id=row_id())
        assert rec.flush() == 15
    finally:
        writer_engine.dispose()
    with db.read_session(engine) as s:
        assert len(s.exec(select(CardUse)).all()) == 15
    if settings.database_url is None:  # SQLite binds JSON as text through the serializer
        assert len(calls) == 3


def test_past_the_cap_the_oldest_uses_are_dropped(settings, engine, monkeypatch) -> None:
    import memory_core.serve.uses as uses_module

    ids = [add_card(engine, scenario=f"card {i}").card_id for i in range(3)]
    monkeypatch.setattr(uses_module, "MAX_PENDING", 4)
    rec = UseRecorder(engine=engine)
    rec.record(namespace="team-a", card_ids=ids, query_id=row_id())  # 3 queued
    kept = rec.record(namespace="team-a", card_ids=ids[:2], query_id=row_id())  # 5: drop 1
    assert rec.dropped == 1
    last = rec.record(namespace="team-a", card_ids=ids, query_id=row_id())  # 7: drop 3 more
    assert rec.dropped == 4 and rec.flush() == 4 and MAX_PENDING == 200_000
    with db.read_session(engine) as s:
        written = {u.id for u in s.exec(select(CardUse)).all()}
    assert written == {kept[ids[1]], *last.values()}


def test_a_batch_goes_to_the_driver_a_hundred_rows_to_a_statement(settings, engine) -> None:
    """Each statement hands the GIL back once (and under load waits for it): a batch of 1,000
    uses of 250 cards is a few statements, not one per row, and reads back exactly."""
    from sqlalchemy import event

    ids = [add_card(engine, scenario=f"card {i}").card_id for i in range(250)]
    rec = UseRecorder(engine=engine)
    t0 = utcnow()
    for q in range(250):  # 4 uses a query; card i is served 4 times, at t0 + its last query
        picked = [ids[(q + k * 63) % 250] for k in range(4)]
        rec.record(namespace="team-a", card_ids=picked, now=t0 + timedelta(seconds=q))
    rec.record(namespace="team-a", card_ids=[], withheld=ids[:3], now=t0)
    seen: list[tuple[str, bool]] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        seen.append((statement.split()[0], executemany))

    event.listen(engine, "before_cursor_execute", count)
    try:
        assert rec.flush() == 1003
    finally:
        event.remove(engine, "before_cursor_execute", count)
    writes = [s for s in seen if s[0] in ("INSERT", "WITH", "SELECT")]
    locks = 3 if settings.database_url else 0  # PostgreSQL locks each chunk's cards first
    assert len(writes) == 11 + 3 + locks and not any(many for _, many in writes)
    with db.read_session(engine) as s:
        assert len(s.exec(select(CardUse)).all()) == 1003
        cards = {c.card_id: c for c in s.exec(select(Card)).all()}
    for i, cid in enumerate(ids):
        last = max(q for q in range(250) for k in range(4) if (q + k * 63) % 250 == i)
        assert (cards[cid].use_count, cards[cid].last_used_at) == (4, t0 + timedelta(seconds=last))


def test_the_count_update_finds_cards_by_key_not_by_namespace(settings, engine) -> None:
    """SQLite's plan of the update (no statistics): a lookup by key per card; a walk of the
    namespace's index per statement grew with the namespace (a million cards per chunk)."""
    if settings.database_url is not None:
        return  # PostgreSQL plans from statistics; the statement is the same join
    from memory_core.serve.use_sql import UseStatements

    update = UseStatements(engine.dialect).update(100)
    args = [x for i in range(100) for x in (1, "2026-01-01 00:00:00", f"{i:032x}")] + ["ns"]
    with engine.connect() as conn:
        plan = [r[3] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + update.sql, tuple(args))]
    assert any("card_id=?" in step for step in plan), plan
    assert not any("namespace=?" in step for step in plan), plan


def test_writers_of_two_processes_on_the_same_cards_count_every_use(settings, engine) -> None:
    """Two API processes (here: two engines, two writers) flush uses of the same cards at the
    same time, in opposite orders: neither deadlocks nor loses a count."""
    import threading

    ids = [add_card(engine, scenario=f"card {i}").card_id for i in range(300)]
    engines = [db.make_engine(settings), db.make_engine(settings)]
    writers = [UseRecorder(engine=e) for e in engines]
    errors: list[BaseException] = []

    def run(w: int) -> None:
        order = ids if w == 0 else ids[::-1]
        try:
            for _ in range(6):
                for q in range(0, 300, 3):
                    writers[w].record(namespace="team-a", card_ids=order[q : q + 3])
                writers[w].flush()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in (0, 1)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        for e in engines:
            e.dispose()
    assert not errors and all(w.written == 1800 for w in writers)
    with db.read_session(engine) as s:
        assert len(s.exec(select(CardUse)).all()) == 3600
        assert {c.use_count for c in s.exec(select(Card)).all()} == {12}


def test_a_query_the_database_refuses_is_dropped_alone(settings, engine) -> None:
    """A use of a card that is not there (a database restored from an older copy) fails the
    batch's foreign key: the other queries' uses are written, only that query's are dropped,
    and the writer goes on; an outage, by contrast, keeps everything for the next attempt."""
    a, b = (add_card(engine, scenario=f"card {i}").card_id for i in range(2))
    rec = UseRecorder(engine=engine)
    good = rec.record(namespace="team-a", card_ids=[a, b])
    rec.record(namespace="team-a", card_ids=[a, row_id()])  # one card unknown: both refused
    later = rec.record(namespace="team-a", card_ids=[b])
    assert rec.flush() == 3 and rec.rejected == 2 and rec.pending == 0
    assert rec.last_error is not None  # shown by readiness until a clean write
    with db.read_session(engine) as s:
        written = {u.id for u in s.exec(select(CardUse)).all()}
        cards = {c.card_id: c.use_count for c in s.exec(select(Card)).all()}
    assert written == {*good.values(), *later.values()}
    assert cards == {a: 1, b: 2}
    rec.record(namespace="team-a", card_ids=[a])
    assert rec.flush() == 1 and rec.last_error is None and rec.written == 4


def test_an_outage_keeps_every_use_for_the_next_attempt(settings, engine) -> None:
    import pytest
    from sqlalchemy import create_engine
    from sqlalchemy.exc import OperationalError

    a = add_card(engine, scenario="card").card_id
    down = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")  # nothing listens
    rec = UseRecorder(engine=down)
    rec.record(namespace="team-a", card_ids=[a, a])
    rec.record(namespace="team-a", card_ids=[a])
    with pytest.raises(OperationalError):
        rec.flush()
    assert (rec.pending, rec.written, rec.rejected) == (3, 0, 0) and rec.last_error
    down.dispose()


def test_a_statement_of_any_row_count_is_the_one_sqlalchemy_compiles() -> None:
    """Each row count's statement is cut from the statement of a hundred rows: its text and
    parameter names are those SQLAlchemy compiles for that count, for both drivers."""
    from sqlalchemy.dialects import postgresql, sqlite

    from memory_core.models.query_log import QueryLog
    from memory_core.serve import use_sql
    from memory_core.serve.use_sql import CHUNK, UseStatements, _Compiled

    kinds = {
        "insert": (use_sql._insert, use_sql.INSERT_COLUMNS, []),
        "insert_queries": (
            lambda n: use_sql._insert(n, QueryLog.__tablename__, use_sql.QUERY_COLUMNS),
            use_sql.QUERY_COLUMNS,
            [],
        ),
        "update": (use_sql._update, use_sql.UPDATE_COLUMNS, ["ns"]),
        "lock": (use_sql._lock, ("cid",), ["ns"]),
    }
    for dialect in (sqlite.dialect(), postgresql.psycopg.dialect()):
        statements = UseStatements(dialect)
        for kind, (build, columns, extra) in kinds.items():
            for n in (1, 2, 37, CHUNK - 1, CHUNK, 5):
                names = [f"{c}_{i}" for i in range(n) for c in columns] + extra
                want = _Compiled.of(build(n), dialect, names)
                got = getattr(statements, kind)(n)
                assert (got.sql, got.names, got.named) == (want.sql, want.names, want.named)
                rows = got.sql.count("?") if not got.named else got.sql.count("%(")
                assert rows == len(names)
