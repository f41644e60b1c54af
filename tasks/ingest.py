"""Prefect task: ingest one file or folder of trajectories (idempotent by trajectory key)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from memory_core.ingest.store import IngestReport
from memory_core.settings import Settings
from tasks.plain_night import ingest_run


@task(name="ingest-source", task_run_name="ingest {source}", cache_policy=NO_CACHE)
def ingest_source(source: str, namespace: str, task_type: str, settings: Settings) -> IngestReport:
    """Store every record under `source`; refused records are logged and reported, not fatal."""
    return ingest_run(source, namespace, task_type, settings, get_run_logger())
