"""What an operator reads in the Prefect UI passes through the one redaction first: the run
loggers' lines (with their tracebacks), the artifacts' texts and rows, the run's state message
and the names of task runs named after a trajectory's key. A run's key, a stored error or an
LLM server's error text may hold a credential the agent handed in; the console and the CLI
redact them when they show them, and so does everything the flows publish."""

from __future__ import annotations

import logging
from typing import Any

from memory_core.redact import redact, redact_value

# the loggers of get_run_logger() in a flow run and in a task run (the engine's own lines too)
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
_FORMAT = logging.Formatter()


class RedactRunLogs(logging.Filter):
    """Every record of a run logger leaves with its message and traceback redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = redact(message)
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and not record.exc_text:  # formatters reuse exc_text when set
            record.exc_text = redact(_FORMAT.formatException(record.exc_info))
        return True


_FILTER = RedactRunLogs()


def redact_run_logs() -> None:
    """Install the filter on the run loggers (once per process)."""
    for name in RUN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactRunLogs) for f in logger.filters):
            logger.addFilter(_FILTER)


def for_ui(text: str) -> str:
    """A text for the Prefect UI: an artifact, a state message, a task run's name."""
    return redact(text)


def rows_for_ui(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A table artifact's rows with every string redacted."""
    return [redact_value(r) for r in rows]
