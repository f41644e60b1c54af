"""Flow-run names an operator can read in the Prefect UI, and the flows' task runner."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner


def run_name(flow_name: str) -> Callable[[], str]:
    """A namer giving '<flow> <namespace or all> <UTC time>'."""

    def _name() -> str:
        params = flow_run.parameters.get("params") or {}
        ns = (
            params.get("namespace")
            if isinstance(params, dict)
            else getattr(params, "namespace", None)
        )
        return f"{flow_name} {ns or 'all'} {datetime.now(UTC):%Y-%m-%d %H:%M}"

    return _name


def thread_runner() -> Any:
    """The task runner of the flows: threads, since tasks wait on the database and the LLM."""
    return ThreadPoolTaskRunner(max_workers=32)
