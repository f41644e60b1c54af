"""Database engine, sessions and schema migrations (Alembic) for SQLite and PostgreSQL."""

from __future__ import annotations

import logging
import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, create_engine

from memory_core.settings import Settings

if TYPE_CHECKING:  # Alembic is imported only when a schema has to change (about 0.2 s)
    from alembic.config import Config

_MIGRATIONS = Path(__file__).parent / "migrations"
log = logging.getLogger(__name__)
BUSY_MS = 60_000  # how long a SQLite connection waits for another's write lock


def make_engine(settings: Settings) -> Engine:
    """Build the engine for the configured database (creating the data directory for SQLite)."""
    # hide_parameters: an SQL error's message (a failed stage's, a dead letter's, the Prefect
    # UI's) leaves without the row's values, which the error cuts where redaction misses them
    url = settings.sqlalchemy_url
    if url.startswith("sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 60}, hide_parameters=True)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    engine = create_engine(url, pool_pre_ping=True, hide_parameters=True)
    event.listen(engine, "do_connect", _waiting_connect(settings.database_busy_wait_s))
    return engine


# PostgreSQL reports a full server or one starting up with these (no SQLSTATE at connect time)
_BUSY = ("too many clients", "too many connections", "connection slots are reserved", "starting up")


def _waiting_connect(wait_s: float) -> Any:
    """A connect that waits out a server with no free connection slot: workers and readers
    sharing one PostgreSQL may fill max_connections for a moment, which must not fail a night."""

    def connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        deadline = time.monotonic() + wait_s
        delay = 0.1
        while True:
            try:
                return dialect.loaded_dbapi.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError as error:
                if not any(m in str(error) for m in _BUSY) or time.monotonic() + delay > deadline:
                    raise
                log.warning("database busy (%s); again in %.1f s", _first_line(error), delay)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    return connect


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[-1].strip() if lines else type(error).__name__


READ_ONLY = {"hindsight_read_only": True}  # execution options of a connection that only reads


def _sqlite_begin(conn: Connection) -> None:
    # pysqlite's own BEGIN handling defers the write lock; take it at BEGIN instead. A read-only
    # connection takes none: under WAL it reads a consistent snapshot and never waits behind
    # a writer (a served query must not sleep in SQLite's busy handler)
    read_only = conn.get_execution_options().get("hindsight_read_only")
    conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (see make_engine)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    try:  # the decay stage's ranking needs power(); builds without math functions lack it
        cur.execute("SELECT power(2, 2)")
    except sqlite3.OperationalError:
        dbapi_conn.create_function("power", 2, math.pow, deterministic=True)
    cur.close()


# index entries ANALYZE reads per index on SQLite: its time is bounded whatever the store's
# size (280 ms at 100,000 cards on a loaded machine, where a full one took 860); at 2,000 it
# took a namespace of 100,000 cards for 2,000 and still walked them for the Changes page
ANALYSIS_ROWS = 20_000


def refresh_statistics(engine: Engine, wait_s: float = 2.0) -> None:
    """Planner statistics for SQLite (PostgreSQL's autovacuum keeps its own). Without them
    SQLite takes `namespace = ?` for a ten-row range: a store of one namespace read its cards
    by id through the namespace index (115 ms for 50 ids at 100,000 cards, not 1). A writer
    holding the store past `wait_s` (a night's stage) leaves the old statistics, logged: a
    server must not fail to start for them."""
    if engine.dialect.name != "sqlite":
        return
    raw = engine.raw_connection()  # autocommit (see _sqlite_pragmas): ANALYZE writes alone
    try:
        cur = raw.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
        try:
            cur.execute(f"PRAGMA analysis_limit={ANALYSIS_ROWS}")
            cur.execute("ANALYZE")
        except sqlite3.OperationalError as exc:
            log.warning("SQLite's planner statistics were not refreshed: %s", exc)
        finally:
            cur.execute(f"PRAGMA busy_timeout={BUSY_MS}")
            cur.close()
    finally:
        raw.close()


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the packaged migrations and the given database."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(settings: Settings, revision: str = "head") -> None:
    """Bring the schema up to `revision` (idempotent); a new, empty database gets the head
    schema in one step (memory_core.schema_new), not migration by migration, and a database
    already at head is left without loading Alembic."""
    if settings.sqlalchemy_url.startswith("sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    if revision == "head":
        from memory_core.schema_new import create_new, head_revision, schema_state

        engine = make_engine(settings)
        try:
            with engine.connect() as conn:
                state = schema_state(conn)
            if state is not None and state == head_revision():
                return
            if state == "" and create_new(engine, alembic_config(settings.sqlalchemy_url)):
                return
        finally:
            engine.dispose()
    from alembic import command

    command.upgrade(alembic_config(settings.sqlalchemy_url), revision)


def current_revision(engine: Engine) -> str | None:
    """The schema revision the database is at, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A session that only reads. On SQLite it takes no write lock (BEGIN, not BEGIN
    IMMEDIATE): under WAL it reads a consistent snapshot, never waits behind a writer and never
    holds one off (a snapshot load, a feed read or a health check waited for each use flush)."""
    with engine.connect().execution_options(**READ_ONLY) as conn, Session(bind=conn) as session:
        yield session


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One transaction: commit on success, roll back on any error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
