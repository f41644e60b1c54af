"""Prefect task: ingest one file or folder of trajectories (idempotent by trajectory key)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from memory_core.ingest.store import IngestReport, ingest, iter_sources
from memory_core.settings import Settings
from tasks.runtime import engine_for


@task(name="ingest-source", task_run_name="ingest {source}", cache_policy=NO_CACHE)
def ingest_source(source: str, namespace: str, task_type: str, settings: Settings) -> IngestReport:
    """Store every record under `source`; refused records are logged and reported, not fatal."""
    logger = get_run_logger()
    report = ingest(
        engine=engine_for(settings),
        records=iter_sources([source]),
        namespace=namespace,
        task_type=task_type,
        max_observation_chars=settings.limits.max_observation_chars,
        limits=settings.limits,
    )
    for name, why in report.refused:
        logger.warning("refused %s: %s", name, why)
    logger.info(
        "%s: %d stored, %d already there, %d refused",
        source,
        report.stored,
        report.duplicates,
        len(report.refused),
    )
    report.source = source
    return report
