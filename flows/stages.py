"""Failure isolation and retry for the nightly and retrospect flows.

A stage that fails is recorded and the next stage runs anyway; dead letters are counted and
named from the database (the flow run that parked them); a retried flow run (run_count > 1:
the Prefect UI's Retry, `prefect flow-run retry`) first re-drives the dead letters it parked.
A run that ends Failed carries its summary in a RunFailed exception (the state's data), so
Prefect resolves it as the run's error and the summary stays readable by the caller.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from prefect import get_run_logger
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run
from prefect.states import Completed, Failed
from pydantic import BaseModel

from flows.redacted import for_ui
from flows.summary import RunOutcome, verdict
from memory_core.retrospect.dead_letters import (
    dead_parts,
    list_dead_letters,
    list_rejections,
    redrive,
)
from memory_core.retrospect.rejections import REPEAT_NOTE
from memory_core.settings import Settings
from tasks.runtime import engine_for

R = TypeVar("R")
# the runs a retry re-drove, by flow run id: told apart at the end from runs newly parked
_REDRIVEN: dict[str, set[uuid.UUID]] = {}
Log = logging.Logger | logging.LoggerAdapter[Any]

__all__ = ["RunFailed", "RunOutcome", "count_dead_letters", "final_state", "stage"]


class RunFailed(Exception):
    """A run that ended Failed on purpose (dead letters, failed stages): its one-line message,
    and its summary for whoever reads the state."""

    def __init__(self, message: str, summary: BaseModel) -> None:
        super().__init__(message, summary)
        self.message, self.summary = message, summary

    def __str__(self) -> str:
        return self.message


class _OwnFailure(logging.Filter):
    """Drops the engine's "Engine execution exited with unexpected exception" traceback for a
    run that ended Failed on purpose: Prefect raises a Failed state's error at the end of a run
    a worker started and logs it as an engine crash; the state's message already says why."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, RunFailed)


_OWN_FAILURE = _OwnFailure()
# the logger of the engine's run logger (prefect.logging.loggers.flow_run_logger); a worker's
# run process imports this module (with the flow) before the engine runs it
for _name in ("prefect.flow_runs", "prefect.engine"):
    if _OWN_FAILURE not in logging.getLogger(_name).filters:
        logging.getLogger(_name).addFilter(_OWN_FAILURE)


def this_run() -> str | None:
    """The id of the flow run we are in (None outside one)."""
    return str(flow_run.id) if flow_run.id else None


def redrive_if_retry(settings: Settings, outcome: RunOutcome) -> None:
    """On a retried flow run, send the dead letters this run parked back to the queue."""
    run, count = this_run(), flow_run.run_count
    if run is None or count <= 1:
        return
    outcome.retry_of_run = count
    engine = engine_for(settings)
    _REDRIVEN[run] = {r.id for r in list_dead_letters(engine=engine, run_id=run, limit=None)}
    outcome.redriven = redrive(engine=engine, ids=None, run_id=run)
    get_run_logger().info(
        "retry %d of this run: %d dead letters it parked are queued again", count, outcome.redriven
    )


def stage(
    name: str, run: Callable[[], R], empty: R, outcome: RunOutcome, log: Log | None = None
) -> R:
    """Run one stage; if it fails, record why and hand back `empty` so the next stage runs."""
    try:
        return run()
    # a failing stage must not cost the stages after it their run (nor the summary)
    except Exception as exc:  # noqa: BLE001
        # redacted before it is cut: a secret cut in two is no longer found
        outcome.failures.append(for_ui(f"{name}: {type(exc).__name__}: {exc}")[:500])
        (log or get_run_logger()).error("stage %s failed: %s: %s", name, type(exc).__name__, exc)
        return empty


def count_dead_letters(settings: Settings, outcome: RunOutcome, run: str | None = None) -> None:
    """Name the runs this run parked (and how many of the re-driven came through); `run` is
    the flow run's id, or the id an in-process night parked its dead letters under."""
    run = run or this_run()
    if run is None:
        return
    # every one: the run's message and Retry count them all, beyond any listing's page
    engine = engine_for(settings)
    rows = list_dead_letters(engine=engine, run_id=run, limit=None)
    # one line a run: a run is one dead letter, whichever parts were parked; the lines go to
    # the run's artifact and state message, so keys and errors are redacted (then cut)
    named = [
        f"{for_ui(r.key)}: "
        + for_ui(
            "; ".join(
                f"{'facts: ' if p.part == 'facts' else ''}{p.error}"
                for p in dead_parts(r, run_id=run)
            )
        )[:300]
        for r in rows
    ]
    outcome.dead_letters = named + outcome.dead_letters
    outcome.rejections = [
        for_ui(f"{x.key} ({x.part}): {x.reason}")[:300] + (f" ({REPEAT_NOTE})" if x.repeats else "")
        for x in list_rejections(engine=engine, run_id=run, limit=None)
    ]
    if outcome.redriven:
        before = _REDRIVEN.pop(run, set())
        outcome.again = sum(1 for r in rows if r.id in before)
        outcome.recovered = max(outcome.redriven - outcome.again, 0)


def final_state(outcome: RunOutcome, result: BaseModel) -> State[Any]:
    """Failed (with what to do) when anything was dead-lettered or failed, else Completed."""
    message = verdict(outcome)
    if message is None:
        note = f"; recovered {outcome.recovered} dead letters" if outcome.recovered else ""
        return Completed(message=f"all stages ran{note}", data=result)
    # an exception as the data: Prefect resolves a Failed state's data into the run's error,
    # and a model there raised "Unexpected result for failed state" in the engine
    return Failed(message=message, data=RunFailed(message, result))


def run_summary(state: State[Any]) -> Any:
    """What a finished run returned, Completed or Failed (a Failed run's summary rides on its
    RunFailed); a run that crashed raises its error."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, RunFailed):
        return result.summary
    if isinstance(result, BaseException):
        raise result
    return result
