"""The nightly flow: ingest the given inputs, retrospect over everything pending, validate,
consolidate (merge near-duplicates), then decay (fade, archive, cap)."""

from __future__ import annotations

from prefect import flow
from pydantic import BaseModel

from flows.consolidate import run_consolidate
from flows.decay import decay_params
from flows.naming import run_name, thread_runner
from flows.params import NightlyParams
from flows.report import publish_summary
from flows.retrospect import RetrospectSummary, run_retrospect
from memory_core.settings import Settings
from tasks.consolidate import ConsolidateSummary
from tasks.decay import DecaySummary, decay_task
from tasks.facts import FactsSummary, facts_task
from tasks.ingest import IngestSummary, ingest_source
from tasks.validate import ValidationSummary, validate_task


class NightlySummary(BaseModel):
    """What one nightly run did, stage by stage."""

    ingested: list[IngestSummary] = []
    retrospect: RetrospectSummary = RetrospectSummary()
    facts: FactsSummary = FactsSummary()
    validation: ValidationSummary = ValidationSummary()
    consolidation: ConsolidateSummary = ConsolidateSummary()
    decay: DecaySummary = DecaySummary()


@flow(
    name="nightly",
    flow_run_name=run_name("nightly"),
    log_prints=True,
    task_runner=thread_runner(),
)
def nightly(params: NightlyParams = NightlyParams()) -> NightlySummary:
    """Run the stages in order; each reads what the previous one committed."""
    settings = Settings()
    namespace = params.namespace or settings.namespace
    task_type = params.task_type or settings.default_task_type
    ingested = [ingest_source(src, namespace, task_type, settings) for src in params.input]
    retro = run_retrospect(params.retrospect, settings)
    facts = facts_task(params.retrospect.namespace, settings)
    checked = validate_task(params.retrospect.namespace, settings)
    merged = run_consolidate(params.consolidate, settings)
    # last: the cap ranks the set that validation just grew
    faded = decay_task(decay_params(params.decay, settings), params.decay.namespace, settings)
    summary = NightlySummary(
        ingested=ingested,
        retrospect=retro,
        facts=facts,
        validation=checked,
        consolidation=merged,
        decay=faded,
    )
    publish_summary(summary)  # the run's numbers on its page in the Prefect UI
    return summary
