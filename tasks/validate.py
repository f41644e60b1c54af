"""Prefect task: run the expectation suite over the drafts and move them on."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run, task_run

from memory_core.settings import Settings
from memory_core.validate.summary import ValidationSummary
from tasks.plain import validate_run

__all__ = ["validate_task"]


def _name() -> str:
    return f"validate {task_run.parameters.get('namespace') or 'all namespaces'}"


@task(name="validate-drafts", task_run_name=_name, cache_policy=NO_CACHE)
def validate_task(namespace: str | None, settings: Settings) -> ValidationSummary:
    """Drafts -> active / review / rejected; the report and Data Docs under the data dir."""
    run = str(flow_run.id) if flow_run.id else None  # its refused regenerations count there
    return validate_run(namespace, settings, get_run_logger(), run_id=run)
