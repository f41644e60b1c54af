"""Prefect's logging for the flows a command runs: its own configuration, with one filter for
the temporary server's shutdown.

The temporary Prefect server runs in a process of its own (uvicorn, started by Prefect, its
stderr the command's). When the command exits, the server's shutdown cancels the task-run
recorder in the middle of writing a task run's state: the recorder logs "Error flushing N
events" with a CancelledError traceback, and SQLAlchemy's pool logs the same cancel when the
connection it was using goes back; the flow run had finished by then. A filter added in the
command's process never sees those records, so it goes into the logging configuration Prefect
loads in every process it starts (PREFECT_LOGGING_SETTINGS_PATH, inherited). It sits on the
console handler, not on a logger: a logger's filter does not see its children's records.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

SETTINGS_PATH = "PREFECT_LOGGING_SETTINGS_PATH"
FILE_NAME = "hindsight-logging.yml"
# set by Prefect in the environment of the temporary server's process only
EPHEMERAL_SERVER = "PREFECT__SERVER_EPHEMERAL"
# who logs the shutdown's cancel: the recorder, and the pool its connection goes back to
CANCELLED_AT_SHUTDOWN = ("prefect.server.services.task_run_recorder", "sqlalchemy.pool")
_FILTER = "hindsight_shutdown_cancel"


def use_quiet_recorder(prefect_home: Path) -> Path | None:
    """Point Prefect at its default logging configuration plus the shutdown filter, written
    under prefect_home; None (nothing changed) when the environment names a logging
    configuration or prefect_home holds Prefect's own logging.yml: the person's choice wins."""
    if os.environ.get(SETTINGS_PATH) or (prefect_home / "logging.yml").exists():
        return None
    path = prefect_home / FILE_NAME
    text = _config_text()
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        # two commands may start at once on one store: each writes whole files only
        tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    os.environ[SETTINGS_PATH] = str(path)
    return path


def _config_text() -> str:
    """Prefect's default logging.yml with the filter on its console handler; its ${...}
    placeholders stay for Prefect to fill in each process."""
    import yaml  # not at the top: only a command that runs a flow pays for it

    config: dict[str, Any] = yaml.safe_load(_prefect_default().read_text(encoding="utf-8"))
    config.setdefault("filters", {})[_FILTER] = {"()": f"{__name__}.shutdown_cancel_filter"}
    console = config["handlers"]["console"]
    console["filters"] = [*console.get("filters", []), _FILTER]
    header = "# written by hindsight: Prefect's default, the temporary server's shutdown cancel\n"
    return header + str(yaml.safe_dump(config, sort_keys=False))


def _prefect_default() -> Path:
    """Prefect's logging.yml, found without importing Prefect (it reads its settings then)."""
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("prefect is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "logging" / "logging.yml"


def shutdown_cancel_filter() -> Any:
    """The filter logging.config builds: see _not_a_shutdown_cancel."""
    return _not_a_shutdown_cancel


def _not_a_shutdown_cancel(record: Any) -> bool:
    """False (drop it) for a CancelledError logged by the recorder or SQLAlchemy's pool in the
    temporary server's process; anything else, there or in the command, still shows."""
    import asyncio

    exc = record.exc_info[1] if record.exc_info else None
    if not isinstance(exc, asyncio.CancelledError):
        return True
    if os.environ.get(EPHEMERAL_SERVER) != "1":
        return True
    name = record.name
    return not any(name == n or name.startswith(n + ".") for n in CANCELLED_AT_SHUTDOWN)
