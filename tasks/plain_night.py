"""The night's stages without Prefect, over every namespace: what the CLI runs in its own
process when no Prefect API is configured (the flows run the same bodies as tasks).
Nothing here imports Prefect."""

from __future__ import annotations

import logging
from collections.abc import Callable

from memory_core.backtest.stage import GateReport
from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.decay import DecayParams, DecayReport
from memory_core.facts.stage import FactsReport
from memory_core.ingest.store import IngestReport
from memory_core.leases import card_namespaces, each_leased
from memory_core.retrospect.summary import RetrospectSummary
from memory_core.settings import Settings
from tasks.plain import Log, Progress, retrospect_rule_batch
from tasks.plain_consolidate import consolidate_run
from tasks.runtime import engine_for

_log = logging.getLogger("hindsight.stages")


def ingest_run(
    source: str, namespace: str, task_type: str, settings: Settings, log: Log = _log
) -> IngestReport:
    """Store every record under `source`; refused records are logged and reported, not fatal."""
    from memory_core.ingest.otlp.files import TraceCollector
    from memory_core.ingest.otlp.receive import ingest_spans
    from memory_core.ingest.store import ingest, iter_sources

    engine = engine_for(settings)
    traces = TraceCollector(only_traces=False)  # trace exports among the files: their spans
    report = ingest(
        engine=engine,
        records=traces.filter(iter_sources([source])),
        namespace=namespace,
        task_type=task_type,
        max_observation_chars=settings.limits.max_observation_chars,
        limits=settings.limits,
    )
    if traces.exports:  # a file holds all there is: a trace without its root goes in as is
        got = ingest_spans(
            engine=engine,
            namespace=namespace,
            spans=traces.spans,
            task_type=task_type,
            limits=settings.limits,
            wait=None,
        )
        report.stored += got.stored
        report.duplicates += got.duplicates
        report.refused += got.refused
    for name, why in report.refused:
        log.warning("refused %s: %s", name, why)
    log.info(
        "%s: %d stored, %d already there, %d refused",
        source,
        report.stored,
        report.duplicates,
        len(report.refused),
    )
    report.source = source
    return report


def waiting_traces_run(settings: Settings, log: Log = _log) -> IngestReport:
    """Traces the OTLP receiver holds past serve.trace_root_wait_s, ingested as incomplete:
    a trace whose root span never came is not left behind when no request follows."""
    from datetime import timedelta

    from memory_core.ingest.otlp.receive import flush_waiting

    report = flush_waiting(
        engine=engine_for(settings),
        task_type=settings.default_task_type,
        wait=timedelta(seconds=settings.serve.trace_root_wait_s),
        limits=settings.limits,
    )
    if report.traces:
        log.info(
            "waiting traces: %d ingested as incomplete, %d stored", report.traces, report.stored
        )
    return IngestReport(stored=report.stored, duplicates=report.duplicates, refused=report.refused)


def facts_run(
    namespace: str | None, settings: Settings, log: Log = _log, run_id: str | None = None
) -> FactsReport:
    """Rule facts (and LLM facts when an LLM is configured) from new trajectories; a run whose
    LLM part still fails is parked as a dead letter remembering run_id."""
    from memory_core.facts.llm import build_fact_extractor
    from memory_core.facts.stage import extract_facts

    engine = engine_for(settings)
    report = extract_facts(
        engine=engine,
        namespace=namespace,
        llm=build_fact_extractor(settings, engine),
        screen=settings.screen,
        run_id=run_id,
        retry_delays_s=settings.llm.retry_delays_s,
    )
    for failed in report.llm_failed:
        log.error("facts dead letter %s", failed)
    for error in report.errors:
        log.warning("facts: %s", error)
    log.info(
        "%d trajectories, %d statements: %d facts found, %d new, %d refreshed, %d superseded",
        report.trajectories,
        report.statements,
        report.found,
        report.new,
        report.refreshed,
        report.superseded,
    )
    return report


def gate_run(namespace: str | None, settings: Settings, log: Log = _log) -> GateReport:
    """Backtest the live cards on later runs; serve the broad, mostly right ones, hold the rest."""
    from memory_core.backtest.stage import run_gate

    report = run_gate(engine=engine_for(settings), rules=settings.gate, namespace=namespace)
    log.info(
        "gate: %d cards, %d served, %d waiting in review (%d sent now, %d back), %d runs replayed",
        report.cards,
        report.served,
        report.waiting,
        report.to_review,
        report.to_active,
        report.runs,
    )
    if report.to_review or report.to_active:
        # consolidate left the vector index holding exactly the served cards; the cards the
        # gate moved in or out of service would otherwise be stale or missing until next night
        from tasks.plain_consolidate import embedder_for, sync_index

        embedder = embedder_for(settings)
        if embedder is not None:
            log.info("index after the gate: %s", sync_index(namespace, settings, embedder, log))
    return report


def retrospect_rules(
    namespace: str | None,
    settings: Settings,
    log: Log = _log,
    *,
    worker: str,
    run_id: str | None = None,
    max_batches: int | None = None,
) -> RetrospectSummary:
    """Rule extraction, batch by batch, until nothing is pending (or max_batches ran)."""
    totals = RetrospectSummary()
    while max_batches is None or totals.batches < max_batches:
        batch = retrospect_rule_batch(namespace, worker, settings, log, run_id=run_id)
        if batch.claimed == 0:
            break
        totals.add(batch)
    return totals


# What one namespace's part of a stage is: the plain body here, the Prefect task in a flow.
# A consolidate part hears (namespace, its place, how many) for the progress it reports, and
# answers its summary or why it failed (that namespace only: the others still run).
ConsolidatePart = Callable[[str, int, int], "ConsolidateSummary | str"]
DecayPart = Callable[[str | None], DecayReport]


def consolidate_all(
    namespace: str | None, dry_run: bool, settings: Settings, part: ConsolidatePart
) -> ConsolidateSummary:
    """Consolidate one namespace or every one with active cards, each under its lease (a
    namespace another run holds is theirs to finish, named in `elsewhere`; a plan writes
    nothing and takes none): the flow's tasks and the in-process bodies alike."""
    from memory_core.consolidate.stage import live_namespaces

    engine = engine_for(settings)
    names = [namespace] if namespace else live_namespaces(engine=engine)
    total = ConsolidateSummary(dry_run=dry_run)
    counter = iter(range(len(names)))

    def one(ns: str) -> None:
        got = part(ns, next(counter), len(names))
        if isinstance(got, str):
            total.failures.append(f"consolidate {ns}: {got}")
            return
        got.ran = {ns: got.merges + got.facts_superseded}
        total.add(got)

    if dry_run:
        for ns in names:
            one(ns)
        return total
    _, total.elsewhere = each_leased(engine=engine, stage="consolidate", namespaces=names, run=one)
    return total


def consolidate_here(
    dry_run: bool, settings: Settings, log: Log = _log, on_progress: Progress | None = None
) -> ConsolidatePart:
    """The part that consolidates a namespace in this process; on_progress hears (the
    namespace and its step, steps done, steps in all over the namespaces)."""

    def part(ns: str, i: int, count: int) -> ConsolidateSummary:
        def step(what: str, done: int, steps: int) -> None:
            if on_progress is not None:
                where = f"{ns!r} ({i + 1} of {count} namespaces)"
                on_progress(f"{where}: {what}", i * steps + done, count * steps)

        return consolidate_run(ns, dry_run, settings, log, on_progress=step)

    return part


def decay_all(
    params: DecayParams, namespace: str | None, settings: Settings, part: DecayPart
) -> DecayReport:
    """Decay one namespace or every one holding cards, each under its lease (a dry run plans
    them all in one pass): the flow's tasks and the in-process bodies alike."""
    if params.dry_run:
        return part(namespace)
    engine = engine_for(settings)
    total = DecayReport()

    def one(ns: str) -> None:
        got = part(ns)
        got.ran = {ns: got.total}
        total.add(got)

    names = [namespace] if namespace else card_namespaces(engine=engine)
    _, total.elsewhere = each_leased(engine=engine, stage="decay", namespaces=names, run=one)
    return total
