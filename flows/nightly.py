"""The nightly flow: ingest the given inputs, retrospect over everything pending, validate,
consolidate (merge near-duplicates), then decay (fade, archive, cap).

Every stage runs whatever failed before it, and the summary is always published. The run ends
Failed ("18 dead letters: retry this run to re-drive them") when anything was dead-lettered
or failed, so the UI's red is true; retrying it re-drives what it parked, then runs again.
"""

from __future__ import annotations

from prefect import flow
from prefect.client.schemas.objects import State
from pydantic import BaseModel

from flows.consolidate import run_consolidate
from flows.decay import run_decay
from flows.naming import run_name, thread_runner
from flows.params import NightlyParams
from flows.report import publish_summary
from flows.retrospect import run_retrospect
from flows.stages import RunOutcome, count_dead_letters, final_state, redrive_if_retry, stage
from flows.summary import NightlySummary
from memory_core.settings import Settings
from tasks.facts import facts_task
from tasks.gate import gate_task
from tasks.ingest import ingest_source
from tasks.validate import validate_task


def run_nightly(params: NightlyParams, settings: Settings) -> NightlySummary:
    """Every stage in order, each isolated: a failure is recorded and the next one runs."""
    out = RunOutcome()
    s = NightlySummary(outcome=out)
    stage("redrive", lambda: redrive_if_retry(settings, out), None, out)
    namespace = params.namespace or settings.namespace
    task_type = params.task_type or settings.default_task_type
    for src in params.input:
        got = stage(
            f"ingest {src}",
            lambda src=src: ingest_source(src, namespace, task_type, settings),  # type: ignore[misc]
            None,
            out,
        )
        if got is not None:
            s.ingested.append(got)
    s.retrospect = stage(
        "retrospect", lambda: run_retrospect(params.retrospect, settings), s.retrospect, out
    )
    s.facts = stage(
        "facts", lambda: facts_task(params.retrospect.namespace, settings), s.facts, out
    )
    # a run whose LLM facts failed is parked as a dead letter of this flow run: it is named
    # below with the others ("facts of <key>: ..."), and this run's Retry re-drives it
    s.validation = stage(
        "validate", lambda: validate_task(params.retrospect.namespace, settings), s.validation, out
    )
    if s.validation.deferred:  # the LLM was down for their regeneration: this run's Retry
        out.failures.append(  # validates them again, so the run is red until then
            f"validate: {s.validation.deferred} failing LLM drafts wait for the LLM to "
            "regenerate them"
        )
    s.consolidation = stage(
        "consolidate", lambda: run_consolidate(params.consolidate, settings), s.consolidation, out
    )
    out.failures += s.consolidation.failures
    stage("gate", lambda: gate_task(params.retrospect.namespace, settings), None, out)
    # last: the cap ranks the set that validation just grew
    s.decay = stage(
        "decay",
        lambda: run_decay(params.decay, settings),
        s.decay,
        out,
    )
    stage("dead letters", lambda: count_dead_letters(settings, out), None, out)
    return s


@flow(
    name="nightly",
    flow_run_name=run_name("nightly"),
    log_prints=True,
    task_runner=thread_runner(),
)
def nightly(params: NightlyParams = NightlyParams()) -> State[BaseModel]:
    """Run the stages in order; each reads what the previous one committed."""
    summary = run_nightly(params, Settings())
    publish_summary(summary)  # the run's numbers on its page in the Prefect UI, always
    return final_state(summary.outcome, summary)
