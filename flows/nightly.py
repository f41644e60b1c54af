"""The nightly flow: ingest the given inputs, retrospect over everything pending, validate,
consolidate (merge near-duplicates), decay (fade, archive, cap), then retention (what each
namespace's policy no longer keeps).

Every stage runs whatever failed before it, and the summary is always published. The run ends
Failed ("18 dead letters: retry this run to re-drive them") when anything was dead-lettered
or failed, so the UI's red is true; retrying it re-drives what it parked, then runs again.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.client.schemas.objects import State

from flows.changes import publish_changes
from flows.consolidate import run_consolidate
from flows.decay import run_decay
from flows.naming import run_name, thread_runner
from flows.night import NightSteps, run_night
from flows.params import NightlyParams
from flows.report import publish_summary
from flows.retrospect import run_retrospect
from flows.stages import final_state, redrive_if_retry, stage, this_run
from flows.summary import NightlySummary
from memory_core.models.columns import utcnow
from memory_core.retention.stage import retention_all
from memory_core.settings import Settings
from tasks.facts import facts_task
from tasks.gate import gate_task
from tasks.ingest import ingest_source
from tasks.retention import retention_task
from tasks.runtime import engine_for
from tasks.validate import validate_task


def prefect_steps() -> NightSteps:
    """The stages as Prefect tasks of this flow run (retries, task runs in the UI)."""
    return NightSteps(
        log=get_run_logger(),
        run_id=this_run(),
        ingest=ingest_source,
        retrospect=run_retrospect,
        facts=facts_task,
        validate=validate_task,
        consolidate=run_consolidate,
        gate=gate_task,
        decay=run_decay,
        retention=lambda ns, s: retention_all(
            engine=engine_for(s), namespace=ns, part=lambda n: retention_task(n, s)
        ),
        redrive=redrive_if_retry,
    )


def run_nightly(params: NightlyParams, settings: Settings) -> NightlySummary:
    """Every stage in order as this flow run's tasks, each isolated."""
    return run_night(params, settings, prefect_steps())


@flow(
    name="nightly",
    flow_run_name=run_name("nightly"),
    log_prints=True,
    task_runner=thread_runner(),
)
def nightly(params: NightlyParams = NightlyParams()) -> State[Any]:
    """Run the stages in order; each reads what the previous one committed."""
    settings, started = Settings(), utcnow()
    summary = run_nightly(params, settings)
    publish_summary(summary)  # the run's numbers on its page in the Prefect UI, always
    # what changed, card by card, and why (a failure to list it fails no night)
    stage("changes", lambda: publish_changes(settings, started), 0, summary.outcome)
    return final_state(summary.outcome, summary)
