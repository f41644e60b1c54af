"""Structured logs: with HINDSIGHT_LOG_FORMAT=json, one JSON line per log event on stderr,
carrying the flow run and task run ids and, inside a batch task, the batch number (and the
trajectory key of a per-trajectory task), so a log pipeline can follow one run or one batch.

Prefect's run loggers still send every event to the Prefect API as well (the UI's logs)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from prefect.context import TaskRunContext
from prefect.logging.handlers import PrefectConsoleHandler

from flows.settings import FlowSettings

_RUN_FIELDS = ("flow_run_id", "flow_run_name", "flow_name", "task_run_id", "task_run_name")
# task parameters worth a field of their own: name in the task -> name in the line
_PARAM_FIELDS = {"batch_no": "batch", "key": "trajectory", "namespace": "namespace"}


class JsonLines(logging.Formatter):
    """One JSON object per record: time, level, logger, message, run ids, batch."""

    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _RUN_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                event[name] = str(value)
        ctx = TaskRunContext.get()  # the task this thread runs, if any
        if ctx is not None:
            for param, name in _PARAM_FIELDS.items():
                if ctx.parameters.get(param) is not None:
                    event[name] = ctx.parameters[param]
        if record.exc_info:
            event["error"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str)


def use_json_logs() -> int:
    """Swap Prefect's console handlers (rich, wrapped at the terminal width) for plain stderr
    handlers writing JsonLines; the API handlers stay. Returns how many were swapped."""
    from prefect.logging import configuration

    if not configuration.PROCESS_LOGGING_CONFIG:  # Prefect sets its handlers up lazily
        configuration.setup_logging()
    swapped = 0
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    for logger in loggers:
        for i, handler in enumerate(list(logger.handlers)):
            if isinstance(handler, PrefectConsoleHandler):
                plain = logging.StreamHandler(sys.stderr)
                plain.setLevel(handler.level)
                plain.setFormatter(JsonLines())
                logger.handlers[i] = plain
                swapped += 1
    return swapped


def configure_logs(flow_settings: FlowSettings | None = None) -> None:
    """Apply HINDSIGHT_LOG_FORMAT (text: Prefect's own lines, unchanged)."""
    if (flow_settings or FlowSettings()).log_format == "json":
        use_json_logs()
