"""Prefect task: extract facts from the trajectories not yet fact-extracted (idempotent)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run, task_run

from memory_core.facts.stage import FactsReport
from memory_core.settings import Settings
from tasks.llm import transient_only
from tasks.plain_night import facts_run


def _name() -> str:
    return f"facts {task_run.parameters.get('namespace') or 'all namespaces'}"


@task(
    name="facts",
    task_run_name=_name,
    cache_policy=NO_CACHE,
    retries=3,
    retry_delay_seconds=[2, 8, 30],
    retry_condition_fn=transient_only,  # a re-run skips the trajectories already marked done
)
def facts_task(namespace: str | None, settings: Settings) -> FactsReport:
    """Rule facts (and LLM facts when an LLM is configured) from new trajectories.

    A run whose LLM part still fails is parked as a dead letter of this flow run: retrying the
    flow run (or `hindsight dead-letters redrive`) sends it back."""
    run_id = str(flow_run.id) if flow_run.id else None
    return facts_run(namespace, settings, get_run_logger(), run_id=run_id)
