"""Prefect task: apply one namespace's retention policy (old runs, uses and queries removed)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import task_run

from memory_core.settings import Settings
from tasks.plain import retention_run

__all__ = ["retention_task"]


def _name() -> str:
    return f"retention {task_run.parameters.get('namespace')}"


@task(name="retention", task_run_name=_name, cache_policy=NO_CACHE, retries=1)
def retention_task(namespace: str, settings: Settings) -> dict[str, int]:
    """Remove what the namespace's policy no longer keeps (re-runnable after a kill)."""
    return retention_run(namespace, settings, get_run_logger())
