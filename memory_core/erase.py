"""Deleting text so that it leaves the database files too, not only the rows: on SQLite the
writing connection zeroes the pages it frees, and the write-ahead log is emptied afterwards."""

from __future__ import annotations

from sqlalchemy import Connection, Engine


def zero_freed(conn: Connection) -> None:
    """On SQLite, make this connection overwrite what it deletes with zeros (a no-op on
    PostgreSQL, whose deleted tuples only VACUUM reclaims)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA secure_delete = ON")


def flush_log(engine: Engine) -> None:
    """On SQLite, checkpoint the write-ahead log into the database file and truncate it, so the
    old page images it held are gone."""
    if engine.dialect.name != "sqlite":
        return
    # outside a transaction, which the engine's connections open on first use: a raw one
    raw = engine.raw_connection()
    try:
        raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        raw.close()
