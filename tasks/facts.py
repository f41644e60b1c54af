"""Prefect task: extract facts from the trajectories not yet fact-extracted (idempotent)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run, task_run

from memory_core.facts.llm import build_fact_extractor
from memory_core.facts.stage import FactsReport, extract_facts
from memory_core.settings import Settings
from tasks.llm import transient_only
from tasks.runtime import engine_for


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
    engine = engine_for(settings)
    report = extract_facts(
        engine=engine,
        namespace=namespace,
        llm=build_fact_extractor(settings, engine),
        screen=settings.screen,
        run_id=str(flow_run.id) if flow_run.id else None,
        retry_delays_s=settings.llm.retry_delays_s,
    )
    logger = get_run_logger()
    for failed in report.llm_failed:
        logger.error("facts dead letter %s", failed)
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
    return report
