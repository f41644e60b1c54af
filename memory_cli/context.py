"""Shared CLI plumbing: settings and engine from the environment, errors as clear messages."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from memory_cli.output import err_console, literal
from memory_cli.prefect_logging import use_quiet_recorder
from memory_core.errors import HindsightError, InvalidInput, NotFound

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_core.settings import Settings


class _Verbosity:
    """The root `--verbose` flag: say which store a command opens even when not on a terminal."""

    on = False


VERBOSE = _Verbosity()


def load(*, migrate: bool = True) -> tuple[Settings, Engine]:
    """Settings from HINDSIGHT_* variables, and an engine on a migrated schema; which store
    it is goes first on stderr (on a terminal, with --verbose, or when it is new)."""
    # imported here, not at the top: `hindsight --help` must not pay for SQLAlchemy/pydantic
    from memory_core import db
    from memory_core.settings import Settings

    settings = Settings()
    announce_store(settings)
    if migrate:
        db.upgrade(settings)
    return settings, db.make_engine(settings)


def announce_store(settings: Settings) -> None:
    """One line on stderr naming the store and why that one; stdout stays the command's own."""
    from memory_core.settings_store import describe_store, is_new

    new = is_new(settings)
    if not (new or VERBOSE.on or err_console.is_terminal):
        return
    line = describe_store(settings) + (" - new, empty" if new else "")
    err_console.print(line, style="dim", markup=False, highlight=False, soft_wrap=True)


@contextmanager
def fail_on_errors() -> Iterator[None]:
    """Turn Hindsight errors into one red line and an exit code (2: bad input, 1: other)."""
    try:
        yield
    except InvalidInput as exc:
        err_console.print(f"[red]error:[/red] {literal(exc)}", soft_wrap=True)
        raise typer.Exit(2) from exc
    except NotFound as exc:
        err_console.print(f"[red]not found:[/red] {literal(exc)}", soft_wrap=True)
        raise typer.Exit(1) from exc
    except HindsightError as exc:
        err_console.print(f"[red]error:[/red] {literal(exc)}", soft_wrap=True)
        raise typer.Exit(1) from exc


def read_json_arg(value: str, *, field: str) -> Any:
    """A JSON argument given inline, as @file, or as - for stdin."""
    if value == "-":
        text = sys.stdin.read()
    elif value.startswith("@"):
        path = Path(value[1:])
        if not path.is_file():
            raise InvalidInput(f"no such file: {path}", field=field)
        text = path.read_text(encoding="utf-8")
    else:
        text = value
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"not valid JSON: {exc}", field=field) from exc


class _Inline:
    """The Prefect settings of flows this process runs itself, kept until it exits."""

    stack = ExitStack()
    entered = False


_INLINE_RUNS = _Inline()


def datetime_arg(value: str | None, *, field: str) -> datetime | None:
    """An ISO date or time from the command line (UTC when it names no zone), or None."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidInput(f"{value!r} is not an ISO date or time", field=field) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def prefect_defaults(data_dir: Path) -> None:
    """Embedded Prefect: no analytics, its state under our data directory unless set already."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_HOME", str((data_dir / "prefect").resolve()))
    prefect_home = Path(os.environ["PREFECT_HOME"])
    prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # the temporary server's own warnings (event flush retries at shutdown) are Prefect's
    # housekeeping, not the run's; its errors still show
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "ERROR")
    # Prefect's 20 s default is too short on a busy 2-core machine (at a load of 20 the
    # temporary server took longer): wait as long as a loaded host needs
    os.environ.setdefault(STARTUP_TIMEOUT, "600")
    # the temporary server (a process of its own) logs a traceback when its shutdown cancels a
    # task run's record; the filter has to reach that process through Prefect's logging file
    use_quiet_recorder(prefect_home)
    if not _INLINE_RUNS.entered:  # once per process; Prefect reads the env set above
        from flows.naming import inline_runs

        _INLINE_RUNS.stack.enter_context(inline_runs())
        _INLINE_RUNS.entered = True


STARTUP_TIMEOUT = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"


@contextmanager
def temporary_server() -> Iterator[None]:
    """Around a flow run in this process: when Prefect's temporary server (no PREFECT_API_URL)
    does not come up in time, one line naming the settings instead of Prefect's traceback."""
    try:
        yield
    except RuntimeError as exc:
        if os.environ.get("PREFECT_API_URL") or "ephemeral Prefect API server" not in str(exc):
            raise
        wait = os.environ.get(STARTUP_TIMEOUT, "20")
        raise HindsightError(
            f"the temporary Prefect server did not start within {wait} s (a busy host?): "
            f"raise {STARTUP_TIMEOUT}, or set PREFECT_API_URL to a running Prefect server"
        ) from None


_PREFECT_WORKERS = ("EventsWorker", "APILogWorker")
_FLUSH_TIMEOUT_S = 30.0


def flush_prefect() -> None:
    """After a flow run in this process: send Prefect's queued events and logs now, while its
    temporary server is still up, instead of at interpreter exit (where the drain logs
    "Still processing items" and a server stopped meanwhile fails the flush). Only those
    workers' progress warnings are quieted; a failure to send still logs an error."""
    import logging

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for name in _PREFECT_WORKERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for worker in (APILogWorker, EventsWorker):  # logs first: sending them emits no events
        worker.drain_all(timeout=_FLUSH_TIMEOUT_S, at_exit=False)
