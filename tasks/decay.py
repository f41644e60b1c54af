"""Prefect task: run the decay stage (time decay, the unused archive, the cap) once."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import task_run

from memory_core.decay import DecayParams, DecayReport
from memory_core.settings import Settings
from tasks.plain import decay_run
from tasks.runtime import concurrent_update

__all__ = ["decay_task"]


def _name() -> str:
    dry = " (dry run)" if getattr(task_run.parameters.get("params"), "dry_run", False) else ""
    return f"decay {task_run.parameters.get('namespace') or 'all namespaces'}{dry}"


@task(
    name="decay",
    task_run_name=_name,
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[2, 8],
    retry_condition_fn=concurrent_update,
)
def decay_task(params: DecayParams, namespace: str | None, settings: Settings) -> DecayReport:
    """Plan the rules, then (unless a dry run) apply them in one transaction."""
    return decay_run(params, namespace, settings, get_run_logger())
