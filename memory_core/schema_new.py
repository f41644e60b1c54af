"""A new store's schema in one step: the models' tables (create_all), what the migrations add
beyond the models (the change feed's triggers, the card table's fill factor, the first tool's
expression index), stamped at the head revision. Running every migration one by one on an
empty database took most of a new store's first command (17 migrations, a SQLite table
rebuild each for several)."""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:
    from alembic.config import Config

_VERSIONS = Path(__file__).parent / "migrations" / "versions"
# what the change feed's update trigger watches today: 0013's columns, and run_count (0015)
FEED_ALSO_WATCHES = "run_count"
_LOCK = 0x68696E64  # PostgreSQL advisory lock: one process creates a new schema at a time


def _migration(file: str) -> ModuleType:
    """A migration module by its file name (not an importable module name)."""
    spec = importlib.util.spec_from_file_location(
        f"hindsight_migration_{file[:4]}", _VERSIONS / file
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_REVISION = re.compile(r"^revision(?:: str)? = ['\"](\w+)['\"]", re.M)
_DOWN = re.compile(r"^down_revision(?:: [^=]+)? = ['\"](\w+)['\"]", re.M)


@cache
def head_revision() -> str | None:
    """The one head of the migrations, read off their files without loading Alembic (None: not
    exactly one, and Alembic decides)."""
    revisions, downs = set(), set()
    for path in _VERSIONS.glob("*.py"):
        body = path.read_text(encoding="utf-8")
        revisions.update(_REVISION.findall(body))
        downs.update(_DOWN.findall(body))
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 else None


def schema_state(conn: Connection) -> str | None:
    """The revision the database is at; "" when it holds no table at all (new), None when it
    has tables but no recorded revision."""
    names = inspect(conn).get_table_names()
    if not names:
        return ""
    if "alembic_version" not in names:
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def is_empty(conn: Connection) -> bool:
    """No table at all: a database nothing was created in yet."""
    return not inspect(conn).get_table_names()


def create_new(engine: Engine, config: Config) -> bool:
    """Create the whole schema on an empty database and stamp it at head; False (nothing
    done) when it is not empty, e.g. another process got there first."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations
    from alembic.script import ScriptDirectory
    from sqlmodel import SQLModel

    import memory_core.models  # noqa: F401  (registers the tables on SQLModel.metadata)

    scripts = ScriptDirectory.from_config(config)
    head = scripts.get_current_head()  # raises when the migrations have more than one head
    assert head is not None, "no migrations"
    with engine.begin() as conn:  # one transaction: all of it or nothing
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK})
        if not is_empty(conn):
            return False
        SQLModel.metadata.create_all(conn)
        context = MigrationContext.configure(conn)
        with Operations.context(context):
            feed = _migration("0013_card_change_feed.py")
            feed.create_triggers(f"{feed.WATCHED}, {FEED_ALSO_WATCHES}")
            _migration("0033_console_list_indexes.py").create_first_tool_index()
            if conn.dialect.name == "postgresql":  # 0009: room to rewrite a card row in place
                conn.execute(text("ALTER TABLE card SET (fillfactor = 80)"))
        context.stamp(scripts, head)
    return True
