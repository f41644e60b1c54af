"""Prefect task: extract facts from the trajectories not yet fact-extracted (idempotent)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import task_run
from pydantic import BaseModel

from memory_core.facts.llm import build_fact_extractor
from memory_core.facts.stage import FactsReport, extract_facts
from memory_core.settings import Settings
from tasks.llm import transient_only
from tasks.runtime import engine_for


class FactsSummary(BaseModel):
    """What the facts stage wrote (see memory_core.facts.stage.FactsReport)."""

    trajectories: int = 0
    statements: int = 0
    found: int = 0
    new: int = 0
    refreshed: int = 0
    superseded: int = 0
    skipped_older: int = 0
    refused: int = 0
    llm_calls: int = 0
    llm_cached: int = 0
    llm_invalid: int = 0
    errors: list[str] = []

    @classmethod
    def of(cls, report: FactsReport) -> FactsSummary:
        """The summary of a stage report."""
        return cls.model_validate(vars(report))


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
def facts_task(namespace: str | None, settings: Settings) -> FactsSummary:
    """Rule facts (and LLM facts when an LLM is configured) from new trajectories."""
    engine = engine_for(settings)
    report = extract_facts(
        engine=engine, namespace=namespace, llm=build_fact_extractor(settings, engine)
    )
    logger = get_run_logger()
    for error in report.errors:
        logger.warning("facts: %s", error)
    logger.info(
        "%d trajectories, %d statements: %d facts found, %d new, %d refreshed, %d superseded",
        report.trajectories,
        report.statements,
        report.found,
        report.new,
        report.refreshed,
        report.superseded,
    )
    return FactsSummary.of(report)
