"""Fixtures: a fresh SQLite file per test and one throw-away PostgreSQL database per session."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
from prefect.testing.utilities import prefect_test_harness
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from memory_core import db
from memory_core.serve import feed_poller
from memory_core.settings import Settings
from tasks import runtime
from tests.helpers import fake_model
from tests.helpers.scripted_llm import ScriptedLLM

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# the holdout withholds a random share of matching cards: tests that expect a card served get
# every card; the holdout's own tests (tests/memory_core/effects/test_effects*.py) set a rate
# and a run id
os.environ.setdefault("HINDSIGHT_HOLDOUT__RATE", "0")
PG_ADMIN = os.environ.get(
    "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture(autouse=True)
def _no_feed_pollers_left() -> Iterator[None]:
    """A test's caches stop reading the change feed when it ends: a thread left polling the
    shared PostgreSQL database would see the next test's rows deleted as a pruned feed and
    reload in the middle of it."""
    yield
    feed_poller.close_all()


@pytest.fixture(autouse=True)
def _no_idle_connections_left() -> Iterator[None]:
    """A test's cached engines close their idle connections when it ends: each settings object
    (a data directory per test) gets an engine, and those left open by the tests before filled
    PostgreSQL's 100 connections when two workers and a test's subprocesses ran beside them."""
    yield
    runtime.release_engines()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    name = f"hindsight_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_plain(PG_ADMIN), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = _plain(PG_ADMIN).rsplit("/", 1)[0]
    url = f"{base}/{name}"
    db.upgrade(Settings(database_url=url))
    yield url
    with psycopg.connect(_plain(PG_ADMIN), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _empty(engine: Engine) -> None:
    """Delete the rows the tests before left: one probe finds the tables that have any, and
    DELETE (children first) empties them. TRUNCATE of every table cost 0.3 s a test (it makes
    new files for each table, empty or not); this costs a few milliseconds."""
    tables = SQLModel.metadata.sorted_tables
    probe = " UNION ALL ".join(
        f"SELECT '{t.name}' WHERE EXISTS (SELECT 1 FROM {t.name})" for t in tables
    )
    with engine.begin() as conn:
        used = {row[0] for row in conn.execute(text(probe))}
        for t in reversed(tables):
            if t.name in used:
                conn.execute(t.delete())


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a migrated SQLite database, made once and copied per test."""
    s = Settings(data_dir=tmp_path_factory.mktemp("template") / "data")
    db.upgrade(s)
    return s.data_dir


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings on a fresh, migrated database of each kind."""
    if request.param == "sqlite":
        template = request.getfixturevalue("sqlite_template")
        shutil.copytree(template, tmp_path / "data")
        return Settings(data_dir=tmp_path / "data")
    url = request.getfixturevalue("pg_url")
    s = Settings(data_dir=tmp_path / "data", database_url=url)
    engine = db.make_engine(s)
    _empty(engine)
    engine.dispose()
    return s


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    """An engine on the test database."""
    e = db.make_engine(settings)
    yield e
    e.dispose()


@pytest.fixture
def env_for(settings: Settings) -> dict[str, str]:
    """Environment variables that point a subprocess (or the CLI) at the test database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HINDSIGHT_")}
    env["HINDSIGHT_DATA_DIR"] = str(settings.data_dir)
    env["HINDSIGHT_HOLDOUT__RATE"] = "0"  # as in this process (see the top of this file)
    if settings.database_url:
        env["HINDSIGHT_DATABASE_URL"] = settings.database_url
    return env


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One in-process Prefect API for the whole session."""
    with (
        prefect_test_harness(server_startup_timeout=120),
        temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
    ):
        yield


@pytest.fixture
def prefect_api(prefect_harness) -> dict[str, str]:
    """The session's Prefect API for a subprocess: a command that runs a flow uses it instead
    of starting a temporary server of its own (10-20 s a call; the temporary server's own
    path is tested in tests/memory_cli/test_cli_first_hour.py)."""
    from prefect.settings import PREFECT_API_URL

    return {"PREFECT_API_URL": str(PREFECT_API_URL.value())}


@pytest.fixture
def flow_env(settings, monkeypatch, prefect_harness):
    """Point the flows' Settings() at the test database."""
    monkeypatch.setenv("HINDSIGHT_DATA_DIR", str(settings.data_dir))
    if settings.database_url:
        monkeypatch.setenv("HINDSIGHT_DATABASE_URL", settings.database_url)
    else:
        monkeypatch.delenv("HINDSIGHT_DATABASE_URL", raising=False)
    return settings


@pytest.fixture
def llm_env(flow_env, monkeypatch) -> Callable[..., ScriptedLLM]:
    """Start a scripted server and point HINDSIGHT_LLM__* at it."""
    servers: list[ScriptedLLM] = []

    def start(responder=fake_model.respond, **env: str) -> ScriptedLLM:
        server = ScriptedLLM(
            responder, latency_s=float(env.pop("latency", 0)), api_key="sk-test"
        ).__enter__()
        servers.append(server)
        monkeypatch.setenv("HINDSIGHT_LLM__BASE_URL", server.url)
        monkeypatch.setenv("HINDSIGHT_LLM__MODEL", "scripted-1")
        monkeypatch.setenv("HINDSIGHT_LLM__API_KEY", "sk-test")
        monkeypatch.setenv("HINDSIGHT_LLM__RETRY_DELAYS_S", "[0.05, 0.05, 0.05]")
        monkeypatch.setenv("HINDSIGHT_LLM__MODE", "instead")
        for k, v in env.items():
            monkeypatch.setenv(f"HINDSIGHT_{k.upper()}", v)
        return server

    yield start
    for s in servers:
        s.__exit__(None, None, None)
