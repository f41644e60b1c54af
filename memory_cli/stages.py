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
    from flows.summary import NightlySummary
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


@contextmanager
def as_flow_run(settings: Settings) -> Iterator[None]:
    """Around a flow run from this process: Prefect's defaults, and a temporary server that
    does not start in time said in one line."""
    from memory_cli.context import temporary_server

    _prefect_defaults(settings)
    with temporary_server():
        yield


def _prefect_defaults(settings: Settings) -> None:
    from memory_cli.context import prefect_defaults

    prefect_defaults(settings.data_dir)


def validate(
    *, settings: Settings, namespace: str | None, on_progress: StepReport | None = None
) -> ValidationSummary:
    """The validate stage, here (on_progress hears its steps) or as a flow run."""
    if in_process(settings):
        from tasks.plain import validate_run

        return validate_run(namespace, settings, stage_log(), on_progress=on_progress)
    with as_flow_run(settings):  # Prefect's settings before Prefect is imported
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
        from tasks.plain_night import consolidate_all, consolidate_here

        part = consolidate_here(dry_run, settings, stage_log(), on_progress)
        total = consolidate_all(namespace, dry_run, settings, part)
        if on_progress is not None and not total.ran and not total.elsewhere:
            on_progress("no namespace with active cards", 0, 0)
        return total
    with as_flow_run(settings):
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
        from tasks.plain_night import decay_all

        params = DecayParams(**settings.decay.model_dump(), dry_run=dry_run, now=now)
        log = stage_log()
        return decay_all(
            params,
            namespace,
            settings,
            lambda ns: decay_run(params, ns, settings, log, on_progress=on_progress),
        )
    with as_flow_run(settings):
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
        from tasks.plain_night import retrospect_rules

        totals = retrospect_rules(namespace, settings, stage_log(), worker=worker_id())
        n = totals.dead_letters
        failed = RunFailure(f"{n} dead letters: see hindsight dead-letters list", []) if n else None
        return totals.model_dump(), failed
    with as_flow_run(settings):
        from flows.params import RetrospectParams
        from flows.retrospect import RetrospectRun
        from flows.retrospect import retrospect as retrospect_flow
        from memory_cli.context import flush_prefect

        state = retrospect_flow(RetrospectParams(namespace=namespace), return_state=True)
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


def nightly(
    *, settings: Settings, input: list[str], namespace: str | None, task_type: str | None
) -> tuple[NightlySummary, RunFailure | None]:
    """The night here, stage by stage (no Prefect API and no LLM: nothing to wait for), or as
    a flow run (its run, artifacts and Retry in that server's UI)."""
    here = in_process(settings, needs_llm_tasks=bool(settings.llm.base_url))
    if not here:  # Prefect reads its settings when it is imported: set them first
        _prefect_defaults(settings)
    from flows.params import NightlyParams
    from flows.summary import NightlySummary, verdict

    params = NightlyParams(input=input, namespace=namespace, task_type=task_type)
    if here:
        from flows.night import plain_steps, run_night

        summary = run_night(params, settings, plain_steps(stage_log()))
        message = verdict(summary.outcome)
        if message is not None:  # here a new night re-drives nothing: the command does
            message = message.replace("retry this run to re-drive them", "see below")
    else:
        from flows.nightly import nightly as nightly_flow
        from memory_cli.context import flush_prefect

        with as_flow_run(settings):
            state = nightly_flow(params, return_state=True)
            flush_prefect()
        summary = flow_summary(state, NightlySummary)
        message = (state.message or "failed") if state.is_failed() else None
    if message is None:
        return summary, None
    o = summary.outcome
    return summary, RunFailure(message, [*o.failures, *o.dead_letters])


class RunFailure(NamedTuple):
    """A run that dead-lettered or failed: the message and what it names."""

    message: str
    lines: list[str]


def flow_summary(state: Any, kind: type[S]) -> S:
    """The flow run's summary, Completed or Failed; a run that crashed raises its error."""
    from flows.stages import run_summary

    result = run_summary(state)
    if not isinstance(result, kind):
        raise TypeError(f"the flow returned {type(result).__name__}, not {kind.__name__}")
    return result
