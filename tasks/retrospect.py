"""Prefect task: claim one batch of pending trajectories and retrospect over it."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run, task_run

from memory_core.errors import LeaseLost
from memory_core.retrospect.summary import BatchResult
from memory_core.settings import Settings
from tasks.plain import retrospect_rule_batch


def _lease_lost(_task: object, _run: object, state: State) -> bool:
    """Retry only a lost lease: another worker took the rows, so a retry claims fresh ones."""
    return isinstance(state.result(raise_on_failure=False), LeaseLost)


def _batch_run_name() -> str:
    params = task_run.parameters
    return f"retrospect {params.get('namespace') or 'all namespaces'} batch {params['batch_no']}"


@task(
    name="retrospect-batch",
    task_run_name=_batch_run_name,
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[1, 5],
    retry_condition_fn=_lease_lost,
)
def retrospect_batch(
    batch_no: int, namespace: str | None, worker: str, settings: Settings
) -> BatchResult:
    """Claim up to batch_size trajectories, write their cards, and mark them done together."""
    run_id = str(flow_run.id) if flow_run.id else None
    return retrospect_rule_batch(namespace, worker, settings, get_run_logger(), run_id=run_id)
