"""Failure isolation and retry for the nightly and retrospect flows.

A stage that fails is recorded and the next stage runs anyway; dead letters are counted and
named from the database (the flow run that parked them); a retried flow run (run_count > 1:
the Prefect UI's Retry, `prefect flow-run retry`) first re-drives the dead letters it parked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from prefect import get_run_logger
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run
from prefect.states import Completed, Failed
from pydantic import BaseModel

from memory_core.retrospect.dead_letters import dead_parts, list_dead_letters, redrive
from memory_core.settings import Settings
from tasks.runtime import engine_for

R = TypeVar("R")


class RunOutcome(BaseModel):
    """What a run must tell its operator beyond the counts: what failed, what came back."""

    retry_of_run: int = 0  # the attempt number when this is a retry (run_count), else 0
    redriven: int = 0  # dead letters this flow run had parked, sent back to the queue
    recovered: int = 0  # of those, how many went through this time
    # "key: error" of every run parked by this flow run ("facts of key: error": its facts part)
    dead_letters: list[str] = []
    failures: list[str] = []  # stages (or parts of them) that failed: "stage: error"


def this_run() -> str | None:
    """The id of the flow run we are in (None outside one)."""
    return str(flow_run.id) if flow_run.id else None


def redrive_if_retry(settings: Settings, outcome: RunOutcome) -> None:
    """On a retried flow run, send the dead letters this run parked back to the queue."""
    run, count = this_run(), flow_run.run_count
    if run is None or count <= 1:
        return
    outcome.retry_of_run = count
    outcome.redriven = redrive(engine=engine_for(settings), ids=None, run_id=run)
    get_run_logger().info(
        "retry %d of this run: %d dead letters it parked are queued again", count, outcome.redriven
    )


def stage(name: str, run: Callable[[], R], empty: R, outcome: RunOutcome) -> R:
    """Run one stage; if it fails, record why and hand back `empty` so the next stage runs."""
    try:
        return run()
    # a failing stage must not cost the stages after it their run (nor the summary)
    except Exception as exc:  # noqa: BLE001
        outcome.failures.append(f"{name}: {type(exc).__name__}: {exc}"[:500])
        get_run_logger().error("stage %s failed: %s: %s", name, type(exc).__name__, exc)
        return empty


def count_dead_letters(settings: Settings, outcome: RunOutcome) -> None:
    """Name the runs this flow run parked (and how many of the re-driven came through)."""
    run = this_run()
    if run is None:
        return
    # every one: the run's message and Retry count them all, beyond any listing's page
    rows = list_dead_letters(engine=engine_for(settings), run_id=run, limit=None)
    named = [
        f"{'facts of ' if p.part == 'facts' else ''}{r.key}: {p.error}"[:300]
        for r in rows
        for p in dead_parts(r, run_id=run)
    ]
    outcome.dead_letters = named + outcome.dead_letters
    if outcome.redriven:  # parts, as redrive counts them
        outcome.recovered = max(outcome.redriven - len(named), 0)


def final_state(outcome: RunOutcome, result: BaseModel) -> State[BaseModel]:
    """Failed (with what to do) when anything was dead-lettered or failed, else Completed."""
    n, f = len(outcome.dead_letters), len(outcome.failures)
    if not n and not f:
        note = f"; recovered {outcome.recovered} dead letters" if outcome.recovered else ""
        return Completed(message=f"all stages ran{note}", data=result)
    parts = []
    if n:
        parts.append(f"{n} dead letter{'s' if n != 1 else ''}")
    if f:
        parts.append(f"{f} failure{'s' if f != 1 else ''} ({outcome.failures[0][:120]})")
    return Failed(message=f"{', '.join(parts)}: retry this run to re-drive them", data=result)
