"""Prefect task: consolidate one namespace (merge near-duplicates, retire contradicted facts)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import task_run

from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.settings import Settings
from tasks.plain_consolidate import consolidate_run, embedder_for
from tasks.runtime import concurrent_update

__all__ = ["consolidate_task", "embedder_for"]


def _name() -> str:
    dry = " (dry run)" if task_run.parameters.get("dry_run") else ""
    return f"consolidate {task_run.parameters['namespace']}{dry}"


@task(
    name="consolidate",
    task_run_name=_name,
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[2, 8],
    retry_condition_fn=concurrent_update,
)
def consolidate_task(namespace: str, dry_run: bool, settings: Settings) -> ConsolidateSummary:
    """Plan, check and apply the merges of one namespace in one transaction."""
    return consolidate_run(namespace, dry_run, settings, get_run_logger())
