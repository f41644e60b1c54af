"""A database that refuses a connection is a transient error for the LLM tasks' retries; a
statement the database rejects is not."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tasks.llm import _database_unreachable
from tests.helpers.net import free_port


def _raised(url: str, statement: str) -> OperationalError:
    engine = create_engine(url)
    try:
        with pytest.raises(OperationalError) as caught, engine.connect() as conn:
            conn.execute(text(statement))
    finally:
        engine.dispose()
    return caught.value


def test_a_refused_postgresql_connection_is_retried() -> None:
    port = free_port()  # nothing listens there
    error = _raised(f"postgresql+psycopg://postgres@127.0.0.1:{port}/x", "select 1")
    assert _database_unreachable(error)


def test_a_missing_sqlite_table_is_not(tmp_path) -> None:
    error = _raised(f"sqlite:///{tmp_path / 'db.sqlite'}", "select * from nowhere")
    assert not _database_unreachable(error)
    assert not _database_unreachable(ValueError("not a database error"))
