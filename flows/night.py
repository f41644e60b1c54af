"""The night's stages in order, each isolated (a failure is recorded and the next one runs),
over a set of steps: the Prefect tasks in the nightly flow, or the same bodies called in this
process when the CLI runs a night without a Prefect API (no temporary server to wait for)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from flows.params import ConsolidateParams, DecayFlowParams, NightlyParams, RetrospectParams
from flows.stages import Log, count_dead_letters, stage
from flows.summary import NightlySummary, RunOutcome
from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.decay import DecayParams, DecayReport
from memory_core.facts.stage import FactsReport
from memory_core.ingest.store import IngestReport
from memory_core.retention.stage import RetentionReport, retention_all
from memory_core.retrospect.summary import RetrospectSummary
from memory_core.settings import Settings
from memory_core.validate.summary import ValidationSummary
from tasks.plain_night import waiting_traces_run
from tasks.runtime import engine_for


@dataclass(frozen=True)
class NightSteps:
    """What runs each stage, where its log lines go, and the run id dead letters remember."""

    log: Log
    run_id: str | None
    ingest: Callable[[str, str, str, Settings], IngestReport]
    retrospect: Callable[[RetrospectParams, Settings], RetrospectSummary]
    facts: Callable[[str | None, Settings], FactsReport]
    validate: Callable[[str | None, Settings], ValidationSummary]
    consolidate: Callable[[ConsolidateParams, Settings], ConsolidateSummary]
    gate: Callable[[str | None, Settings], object]
    decay: Callable[[DecayFlowParams, Settings], DecayReport]
    # the namespaces' retention policies: old runs (kept as summaries when cited) and uses
    retention: Callable[[str | None, Settings], RetentionReport]
    redrive: Callable[[Settings, RunOutcome], None]


def run_night(params: NightlyParams, settings: Settings, steps: NightSteps) -> NightlySummary:
    """Every stage in order, each isolated: a failure is recorded and the next one runs."""
    out, log = RunOutcome(), steps.log
    s = NightlySummary(outcome=out)
    stage("redrive", lambda: steps.redrive(settings, out), None, out, log)
    namespace = params.namespace or settings.namespace
    task_type = params.task_type or settings.default_task_type
    # traces whose root span never came, past their wait (plain: a few rows, no LLM)
    waited = stage("waiting traces", lambda: waiting_traces_run(settings, log), None, out, log)
    if waited is not None and waited.seen:
        waited.source = "waiting traces"
        s.ingested.append(waited)
    for src in params.input:
        got = stage(
            f"ingest {src}",
            lambda src=src: steps.ingest(src, namespace, task_type, settings),  # type: ignore[misc]
            None,
            out,
            log,
        )
        if got is not None:
            s.ingested.append(got)
    s.retrospect = stage(
        "retrospect", lambda: steps.retrospect(params.retrospect, settings), s.retrospect, out, log
    )
    ns = params.retrospect.namespace
    # a run whose LLM facts failed is parked as a dead letter of this run: it is named below
    # with the others ("facts of <key>: ..."), and this run's Retry re-drives it
    s.facts = stage("facts", lambda: steps.facts(ns, settings), s.facts, out, log)
    s.validation = stage("validate", lambda: steps.validate(ns, settings), s.validation, out, log)
    if s.validation.deferred:  # the LLM was down for their regeneration: this run's Retry
        out.failures.append(  # validates them again, so the run is red until then
            f"validate: {s.validation.deferred} failing LLM drafts wait for the LLM to "
            "regenerate them"
        )
    s.consolidation = stage(
        "consolidate",
        lambda: steps.consolidate(params.consolidate, settings),
        s.consolidation,
        out,
        log,
    )
    out.failures += s.consolidation.failures
    # the serving gate: the live cards backtested on later runs, after the merges
    stage("gate", lambda: steps.gate(ns, settings), None, out, log)
    # last: the cap ranks the set that validation just grew
    s.decay = stage("decay", lambda: steps.decay(params.decay, settings), s.decay, out, log)
    # after every stage that reads the runs: what the policies no longer keep goes tonight
    s.retention = stage("retention", lambda: steps.retention(ns, settings), s.retention, out, log)
    stage(
        "dead letters",
        lambda: count_dead_letters(settings, out, steps.run_id),
        None,
        out,
        log,
    )
    return s


def plain_steps(log: Log) -> NightSteps:
    """The stages called in this process (rules only: LLM extraction runs as Prefect tasks);
    dead letters remember a fresh run id of this night, as a flow run's remember its id."""
    from flows.decay import decay_params
    from memory_core.retrospect.claims import worker_id
    from tasks.plain import retention_run, validate_run
    from tasks.plain_night import (
        consolidate_all,
        consolidate_here,
        facts_run,
        gate_run,
        ingest_run,
        retrospect_rules,
    )

    run_id = str(uuid.uuid4())
    return NightSteps(
        log=log,
        run_id=run_id,
        ingest=lambda src, ns, tt, s: ingest_run(src, ns, tt, s, log),
        retrospect=lambda p, s: retrospect_rules(
            p.namespace, s, log, worker=worker_id(), run_id=run_id, max_batches=p.max_batches
        ),
        facts=lambda ns, s: facts_run(ns, s, log, run_id=run_id),
        validate=lambda ns, s: validate_run(ns, s, log, run_id=run_id),
        consolidate=lambda p, s: consolidate_all(
            p.namespace, p.dry_run, s, consolidate_here(p.dry_run, s, log)
        ),
        gate=lambda ns, s: gate_run(ns, s, log),
        decay=lambda p, s: _decay(decay_params(p, s), p.namespace, s, log),
        retention=lambda ns, s: retention_all(
            engine=engine_for(s), namespace=ns, part=lambda n: retention_run(n, s, log)
        ),
        redrive=lambda _s, _o: None,  # a retry is a Prefect run's; here, a new night
    )


def _decay(params: DecayParams, namespace: str | None, settings: Settings, log: Log) -> DecayReport:
    from tasks.plain import decay_run
    from tasks.plain_night import decay_all

    return decay_all(params, namespace, settings, lambda ns: decay_run(params, ns, settings, log))
