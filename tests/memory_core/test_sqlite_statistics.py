"""SQLite's planner statistics, refreshed when a server starts: read by the planner, and a
store held by a writer leaves them as they were instead of failing the start."""

from __future__ import annotations

import logging
import sqlite3
import uuid

from memory_core import db
from memory_core.settings import Settings
from tests.helpers.serve import add_card


def _by_ids_plan(engine, ids: list[uuid.UUID]) -> str:
    marks = ", ".join("?" for _ in ids)
    sql = f"SELECT card_id FROM card WHERE card_id IN ({marks}) AND namespace = ?"
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", (*(i.hex for i in ids), "n"))
        return " ".join(r[-1] for r in rows)


def test_statistics_steer_reads_by_id_off_the_namespace_index(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path)
    db.upgrade(settings)
    engine = db.make_engine(settings)
    try:
        ids = [add_card(engine, namespace="n", scenario=f"card {i}").card_id for i in range(300)]
        before = _by_ids_plan(engine, ids[:50])
        assert "namespace" in before  # no statistics: the namespace looks like a short range
        db.refresh_statistics(engine)
        assert "sqlite_autoindex_card_1" in _by_ids_plan(engine, ids[:50])
    finally:
        engine.dispose()


def test_a_held_store_leaves_the_statistics_and_logs_it(tmp_path, caplog) -> None:
    settings = Settings(data_dir=tmp_path)
    db.upgrade(settings)
    engine = db.make_engine(settings)
    writer = sqlite3.connect(tmp_path / "hindsight.db", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # a night's stage writing
        with caplog.at_level(logging.WARNING, logger="memory_core.db"):
            db.refresh_statistics(engine, wait_s=0.2)
        assert "not refreshed" in caplog.text
        writer.execute("ROLLBACK")
        db.refresh_statistics(engine, wait_s=0.2)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM sqlite_stat1").scalar()
            # the connection waits for writers as long as before
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == db.BUSY_MS
    finally:
        writer.close()
        engine.dispose()
