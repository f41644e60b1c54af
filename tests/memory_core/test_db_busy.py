"""A PostgreSQL server with no free connection slot is waited out, for a bounded time."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from memory_core import db
from memory_core.settings import Settings
from tests.conftest import PG_ADMIN, _plain


@pytest.fixture
def one_slot_url(pg_url: str) -> Iterator[str]:
    """A login role allowed a single connection: a second one is refused as 'too many'."""
    role = f"hs_one_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_plain(PG_ADMIN), autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 1')
    yield pg_url.replace("postgres@", f"{role}@", 1)
    with psycopg.connect(_plain(PG_ADMIN), autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_a_connection_waits_for_a_free_slot(one_slot_url: str, tmp_path) -> None:
    holder = psycopg.connect(one_slot_url)
    threading.Timer(1.0, holder.close).start()
    engine = db.make_engine(Settings(data_dir=tmp_path, database_url=one_slot_url))
    started = time.monotonic()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT 1")).scalar() == 1
    assert time.monotonic() - started >= 0.9  # it waited for the slot, then got it
    engine.dispose()


def test_a_full_server_is_reported_after_the_wait(one_slot_url: str, tmp_path) -> None:
    with psycopg.connect(one_slot_url):
        s = Settings(data_dir=tmp_path, database_url=one_slot_url, database_busy_wait_s=0.5)
        engine = db.make_engine(s)
        started = time.monotonic()
        with pytest.raises(OperationalError, match="too many connections"):
            engine.connect()
        assert 0.3 <= time.monotonic() - started < 5
        engine.dispose()


def test_other_connection_errors_are_raised_at_once(pg_url: str, tmp_path) -> None:
    missing = pg_url.rsplit("/", 1)[0] + "/no_such_database_here"
    engine = db.make_engine(Settings(data_dir=tmp_path, database_url=missing))
    started = time.monotonic()
    with pytest.raises(OperationalError, match="no_such_database_here"):
        engine.connect()
    assert time.monotonic() - started < 2  # not waited out: a retry cannot make it exist
    engine.dispose()
