"""Flow-run names an operator can read in the Prefect UI, and the flows' task runner."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from prefect.runtime import flow_run
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
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


@contextmanager
def inline_runs() -> Iterator[None]:
    """Flows a command runs in its own process: no heartbeat thread (unless the environment
    sets a frequency). The command's exit already tells whether the run crashed, and Prefect's
    heartbeat thread sleeps in 1 s steps, holding the end of every run for up to a second.
    Runs that a worker starts from a deployment keep Prefect's heartbeats."""
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in os.environ:
        yield
        return
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield
