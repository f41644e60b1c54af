"""Where a stage command runs: in this process, or as a flow run on a Prefect server.

With no Prefect API configured (PREFECT_API_URL unset), `validate`, `consolidate`, `decay`
and rule-based `retrospect` call the stage bodies directly (tasks.plain: the same functions the
Prefect tasks run, the same summaries), so a command on a small store answers in about a second
instead of starting a temporary Prefect server. With PREFECT_API_URL set, the command runs the
flow and its run shows in that server's UI. Schedules, retries and the UI stay with
deployments, `hindsight up` and `hindsight nightly`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from memory_cli.output import StepReport, err_console, polled_progress, stage_progress

S = TypeVar("S")

if TYPE_CHECKING:
    from memory_core.settings import Settings


if TYPE_CHECKING:
    from memory_core.consolidate.summary import ConsolidateSummary
    from memory_core.decay import DecayReport
    from memory_core.validate.summary import ValidationSummary


class _Warnings(logging.Handler):
    """A stage's warnings and errors as one yellow line each (its info lines stay quiet)."""

    def emit(self, record: logging.LogRecord) -> None:
        err_console.print(self.format(record), style="yellow", markup=False, highlight=False)


def stage_log() -> logging.Logger:
    """The logger in-process stages write to: warnings shown, info kept out of the way."""
    log = logging.getLogger("hindsight.cli")
    if not log.handlers:
        log.addHandler(_Warnings(level=logging.WARNING))
        log.propagate = False
    return log


def prefect_api() -> str | None:
    """The Prefect server this command should report to, or None: run in process."""
    return os.environ.get("PREFECT_API_URL") or None


def in_process(settings: Settings, *, needs_llm_tasks: bool = False) -> bool:
    """True when the stage runs here, without Prefect (see the module docstring)."""
    return prefect_api() is None and not needs_llm_tasks


@contextmanager
def progress(
    label: str, settings: Settings, poll: Callable[[], tuple[int, int]] | None = None
) -> Iterator[StepReport | None]:
    """The bar of a stage command: moved by the stage's own steps when it runs here; as a flow
    run, fed by polling (when a poll is given) while the flow runs."""
    if in_process(settings):
        with stage_progress(label, transient=True) as report:
            yield report
        return
    with polled_progress(label, poll or (lambda: (0, 0)), transient=True):
        yield None


def _flow_setup(settings: Settings) -> None:
    from memory_cli.context import prefect_defaults

    prefect_defaults(settings.data_dir)


def validate(
    *, settings: Settings, namespace: str | None, on_progress: StepReport | None = None
) -> ValidationSummary:
    """The validate stage, here (on_progress hears its steps) or as a flow run."""
    if in_process(settings):
        from tasks.plain import validate_run

        return validate_run(namespace, settings, stage_log(), on_progress=on_progress)
    _flow_setup(settings)
    from flows.validate import ValidateParams
    from flows.validate import validate as validate_flow

    return validate_flow(ValidateParams(namespace=namespace))


def consolidate(
    *,
    settings: Settings,
    namespace: str | None,
    dry_run: bool,
    on_progress: StepReport | None = None,
) -> ConsolidateSummary:
    """The consolidate stage over one namespace or all with active cards; here, on_progress
    hears (the namespace and its step, steps done, steps in all over the namespaces)."""
    if in_process(settings):
        from memory_core.consolidate.stage import live_namespaces
        from memory_core.consolidate.summary import ConsolidateSummary
        from memory_core.leases import each_leased
        from tasks.plain_consolidate import consolidate_run
        from tasks.runtime import engine_for

        engine = engine_for(settings)
        names = [namespace] if namespace else live_namespaces(engine=engine)
        total = ConsolidateSummary(dry_run=dry_run)
        if on_progress is not None and not names:
            on_progress("no namespace with active cards", 0, 0)
        counter = iter(range(len(names)))

        def one(ns: str) -> None:
            i = next(counter)

            def step(what: str, done: int, steps: int) -> None:
                if on_progress is not None:
                    where = f"{ns!r} ({i + 1} of {len(names)} namespaces)"
                    on_progress(f"{where}: {what}", i * steps + done, len(names) * steps)

            part = consolidate_run(ns, dry_run, settings, stage_log(), on_progress=step)
            part.ran = {ns: part.merges + part.facts_superseded}
            total.add(part)

        if dry_run:  # a plan writes nothing: no lease needed
            for ns in names:
                one(ns)
            return total
        # as the flow does: a namespace another run (a worker, another command) holds is
        # theirs to finish, named in `elsewhere`, never worked twice at once
        _, total.elsewhere = each_leased(
            engine=engine, stage="consolidate", namespaces=names, run=one
        )
        return total
    _flow_setup(settings)
    from flows.consolidate import consolidate as consolidate_flow
    from flows.params import ConsolidateParams

    return consolidate_flow(ConsolidateParams(namespace=namespace, dry_run=dry_run))


def decay(
    *,
    settings: Settings,
    namespace: str | None,
    dry_run: bool,
    now: datetime | None,
    on_progress: StepReport | None = None,
) -> DecayReport:
    """The decay stage with the settings' rules (or, dry, its plan); here, on_progress hears
    its steps."""
    if in_process(settings):
        from memory_core.decay import DecayParams
        from tasks.plain import decay_run

        params = DecayParams(**settings.decay.model_dump(), dry_run=dry_run, now=now)
        if dry_run:
            return decay_run(params, namespace, settings, stage_log(), on_progress=on_progress)
        from memory_core.decay import DecayReport
        from memory_core.leases import card_namespaces, each_leased
        from tasks.runtime import engine_for

        engine = engine_for(settings)
        total = DecayReport()

        def one(ns: str) -> None:
            part = decay_run(params, ns, settings, stage_log(), on_progress=on_progress)
            part.ran = {ns: part.total}
            total.add(part)

        names = [namespace] if namespace else card_namespaces(engine=engine)
        _, total.elsewhere = each_leased(engine=engine, stage="decay", namespaces=names, run=one)
        return total
    _flow_setup(settings)
    from flows.decay import decay as decay_flow
    from flows.params import DecayFlowParams

    return decay_flow(DecayFlowParams(namespace=namespace, dry_run=dry_run, now=now))


def retrospect(
    *, settings: Settings, namespace: str | None
) -> tuple[dict[str, Any], RunFailure | None]:
    """Rule extraction here, batch by batch; LLM extraction (parallel calls, Prefect's retries
    and dead letters visible as failed task runs) always as a flow run."""
    if in_process(settings, needs_llm_tasks=bool(settings.llm.base_url)):
        from memory_core.retrospect.claims import worker_id
        from memory_core.retrospect.summary import RetrospectSummary
        from tasks.plain import retrospect_rule_batch

        totals = RetrospectSummary()
        worker = worker_id()

        while True:
            batch = retrospect_rule_batch(namespace, worker, settings, stage_log())
            if batch.claimed == 0:
                break
            totals.add(batch)
        n = totals.dead_letters
        failed = RunFailure(f"{n} dead letters: see hindsight dead-letters list", []) if n else None
        return totals.model_dump(), failed
    _flow_setup(settings)
    from flows.params import RetrospectParams
    from flows.retrospect import RetrospectRun
    from flows.retrospect import retrospect as retrospect_flow

    state = retrospect_flow(RetrospectParams(namespace=namespace), return_state=True)
    from memory_cli.context import flush_prefect

    flush_prefect()
    summary = flow_summary(state, RetrospectRun)
    failed = (
        RunFailure(
            state.message or "failed", [*summary.outcome.failures, *summary.outcome.dead_letters]
        )
        if state.is_failed()
        else None
    )
    return summary.model_dump(exclude={"outcome"}), failed


class RunFailure(NamedTuple):
    """A run that dead-lettered or failed: the message and what it names."""

    message: str
    lines: list[str]


def flow_summary(state: Any, kind: type[S]) -> S:
    """The flow run's summary, Completed or Failed; a run that crashed raises its error."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, BaseException):
        raise result
    if not isinstance(result, kind):
        raise TypeError(f"the flow returned {type(result).__name__}, not {kind.__name__}")
    return result
