"""Prefect task: run the expectation suite over the drafts and move them on."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import task_run
from pydantic import BaseModel

from memory_core.retrospect.factory import build_llm
from memory_core.settings import Settings
from memory_core.validate.regenerate import llm_regenerator
from memory_core.validate.stage import validate_drafts
from tasks.runtime import engine_for


class ValidationSummary(BaseModel):
    """What one validation run decided."""

    evaluated: int = 0
    activated: int = 0
    review: int = 0
    rejected: int = 0
    rule_failures: dict[str, int] = {}
    docs_index: str | None = None
    deferred: int = 0  # failing LLM drafts kept as drafts: regeneration waits for the LLM


def _name() -> str:
    return f"validate {task_run.parameters.get('namespace') or 'all namespaces'}"


@task(name="validate-drafts", task_run_name=_name, cache_policy=NO_CACHE)
def validate_task(namespace: str | None, settings: Settings) -> ValidationSummary:
    """Drafts -> active / review / rejected; the report and Data Docs under the data dir."""
    llm = build_llm(settings)
    report = validate_drafts(
        regenerate=llm_regenerator(llm) if llm is not None else None,
        engine=engine_for(settings),
        reports_dir=settings.reports_dir,
        namespace=namespace,
        registry=frozenset(settings.tool_registry) if settings.tool_registry else None,
        review_below=settings.review_below,
    )
    logger = get_run_logger()
    logger.info(
        "validated %d drafts: %d active, %d to review, %d rejected",
        report.evaluated,
        report.activated,
        report.review,
        report.rejected,
    )
    if report.deferred:
        logger.warning("%d failing LLM drafts wait for the LLM to regenerate them", report.deferred)
    for rule, n in report.rule_failures.items():
        logger.warning("%d card(s) failed %r", n, rule)
    return ValidationSummary(
        evaluated=report.evaluated,
        activated=report.activated,
        review=report.review,
        rejected=report.rejected,
        rule_failures=report.rule_failures,
        docs_index=report.docs_index,
        deferred=report.deferred,
    )
