"""Prefect task: the serving gate (memory_core.backtest) over a namespace's experience cards."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import task_run

from memory_core.backtest.stage import GateReport
from memory_core.settings import Settings
from tasks.plain_night import gate_run

__all__ = ["gate_task"]


def _name() -> str:
    return f"gate {task_run.parameters.get('namespace') or 'all namespaces'}"


@task(name="gate", task_run_name=_name, cache_policy=NO_CACHE)
def gate_task(namespace: str | None, settings: Settings) -> GateReport:
    """Backtest the live cards on later runs; serve the broad, mostly right ones, hold the rest."""
    return gate_run(namespace, settings, get_run_logger())
