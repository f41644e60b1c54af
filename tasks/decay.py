"""Prefect task: run the decay stage (time decay, the unused archive, the cap) once."""

from __future__ import annotations

import uuid
from datetime import datetime

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import task_run
from pydantic import BaseModel

from memory_core.decay import Change, DecayParams, run_decay
from memory_core.decay.use_log import prune_use_log
from memory_core.settings import Settings
from tasks.runtime import concurrent_update, engine_for


class DecaySummary(BaseModel):
    """What one decay run changed (dry run: would change, with the plan listed)."""

    run_id: uuid.UUID | None = None
    now: datetime | None = None
    dry_run: bool = False
    decayed: int = 0
    archived_unused: int = 0
    archived_cap: int = 0
    skipped: int = 0  # cards changed by others while the stage ran: planned again next run
    changes: list[Change] = []
    uses_pruned: int = 0


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
def decay_task(params: DecayParams, namespace: str | None, settings: Settings) -> DecaySummary:
    """Plan the rules, then (unless a dry run) apply them in one transaction."""
    report = run_decay(
        engine=engine_for(settings),
        params=params,
        weights=settings.ranking,
        namespace=namespace,
    )
    pruned = 0
    if not params.dry_run:  # the use log stays bounded (counts stay on the cards)
        pruned = prune_use_log(
            engine=engine_for(settings),
            retention_days=settings.use_retention_days,
            namespace=namespace,
            now=params.now,
        )
    get_run_logger().info(
        "%s: %d cards faded, %d archived as unused, %d archived over the cap, "
        "%d changed meanwhile (left for the next run)",
        "dry run" if params.dry_run else "decay",
        report.counts["decay"],
        report.counts["unused"],
        report.counts["cap"],
        report.skipped,
    )
    return DecaySummary(
        run_id=None if params.dry_run else report.run_id,
        now=report.now,
        dry_run=params.dry_run,
        decayed=report.counts["decay"],
        archived_unused=report.counts["unused"],
        archived_cap=report.counts["cap"],
        skipped=report.skipped,
        changes=report.changes,
        uses_pruned=pruned,
    )
