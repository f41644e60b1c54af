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

from flows.settings import FlowSettings


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


def task_runner(flow_settings: FlowSettings | None = None) -> Any:
    """The flows' task runner, by HINDSIGHT_TASK_RUNNER: threads (the default: tasks wait on
    the database and the LLM), or Dask through prefect-dask, on HINDSIGHT_DASK_ADDRESS or, with
    no address, on a temporary local cluster per flow run."""
    settings = flow_settings or FlowSettings()
    if settings.task_runner == "dask":
        # heavy (distributed): imported only when asked for
        from prefect_dask.task_runners import DaskTaskRunner

        if settings.dask_address:
            return DaskTaskRunner(address=settings.dask_address)
        return DaskTaskRunner()
    return ThreadPoolTaskRunner(max_workers=32)


def thread_runner() -> Any:
    """The task runner the flows are decorated with: evaluated when a flow module is imported,
    which a worker does afresh for every flow run it starts. To choose at call time:
    `flow.with_options(task_runner=task_runner(flow_settings))`."""
    return task_runner()


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
