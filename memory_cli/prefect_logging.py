"""Prefect's logging for the flows a command runs: its own configuration, and one filter on
the temporary server's task-run recorder.

The temporary Prefect server runs in a process of its own (uvicorn, started by Prefect, its
stderr the command's). When the command exits, the server's shutdown cancels the recorder in
the middle of writing a task run's state, and the recorder logs "Error flushing N events"
with a CancelledError traceback; the flow run had finished by then. A filter added in the
command's process never sees that record, so the filter goes into the logging configuration
that Prefect loads in every process it starts (PREFECT_LOGGING_SETTINGS_PATH, inherited).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

SETTINGS_PATH = "PREFECT_LOGGING_SETTINGS_PATH"
RECORDER = "prefect.server.services.task_run_recorder"
FILE_NAME = "hindsight-logging.yml"
_FILTER = "hindsight_shutdown_cancel"


def use_quiet_recorder(prefect_home: Path) -> Path | None:
    """Point Prefect at its default logging configuration plus the recorder's shutdown filter,
    written under prefect_home; None (nothing changed) when the environment names a logging
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
    """Prefect's default logging.yml with the filter on the recorder's logger; its ${...}
    placeholders stay for Prefect to fill in each process."""
    import yaml  # not at the top: only a command that runs a flow pays for it

    config: dict[str, Any] = yaml.safe_load(_prefect_default().read_text(encoding="utf-8"))
    config.setdefault("filters", {})[_FILTER] = {"()": f"{__name__}.shutdown_cancel_filter"}
    recorder = config.setdefault("loggers", {}).setdefault(RECORDER, {})
    recorder["filters"] = [*recorder.get("filters", []), _FILTER]
    header = "# written by hindsight: Prefect's default, the recorder's shutdown cancel dropped\n"
    return header + str(yaml.safe_dump(config, sort_keys=False))


def _prefect_default() -> Path:
    """Prefect's logging.yml, found without importing Prefect (it reads its settings then)."""
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("prefect is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "logging" / "logging.yml"


def shutdown_cancel_filter() -> Any:
    """The filter logging.config builds: drops a record whose exception is a CancelledError."""
    return _not_a_cancel


def _not_a_cancel(record: Any) -> bool:
    """False (drop it) for a record logged while handling a CancelledError; any other error
    the recorder logs (a database gone, events dropped) still shows."""
    import asyncio

    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, asyncio.CancelledError)
