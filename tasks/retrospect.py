"""Prefect task: claim one batch of pending trajectories and retrospect over it."""

from __future__ import annotations

from datetime import timedelta

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run, task_run
from pydantic import BaseModel

from memory_core.errors import LeaseLost
from memory_core.retrospect.rule_extractor import RuleExtractor
from memory_core.retrospect.stage import BatchResult, retrospect_once
from memory_core.settings import Settings
from tasks.runtime import engine_for


class BatchSummary(BaseModel):
    """Counts of one retrospect batch."""

    claimed: int = 0
    done: int = 0
    dead_letters: int = 0
    deferred: int = 0
    cards_created: int = 0
    evidence_added: int = 0
    llm_calls: int = 0
    tokens_sent: int = 0
    tokens_received: int = 0
    tokens_saved: int = 0

    @classmethod
    def of(cls, result: BatchResult) -> BatchSummary:
        """The counts of a stage result."""
        return cls(**{k: getattr(result, k) for k in cls.model_fields})


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
) -> BatchSummary:
    """Claim up to batch_size trajectories, write their cards, and mark them done together."""
    result = retrospect_once(
        engine=engine_for(settings),
        extractor=RuleExtractor(default_task_type=settings.default_task_type),
        worker=worker,
        batch_size=settings.retrospect_batch_size,
        lease=timedelta(seconds=settings.lease_seconds),
        namespace=namespace,
        run_id=str(flow_run.id) if flow_run.id else None,
        screen=settings.screen,
    )
    logger = get_run_logger()
    for err in result.errors:
        logger.error("dead letter: %s", err)
    if result.claimed:
        logger.info(
            "%d trajectories, %d new cards, %d evidence rows, %d dead letters",
            result.claimed,
            result.cards_created,
            result.evidence_added,
            result.dead_letters,
        )
    return BatchSummary.of(result)
