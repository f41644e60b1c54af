"""Helpers for flow tests: ingest, run retrospection, read cards and failed task runs."""

from __future__ import annotations

import time

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from sqlalchemy import select
from sqlmodel import Session

from flows.params import RetrospectParams
from flows.retrospect import retrospect
from flows.stages import run_summary
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.card import Card
from tests.helpers.data import REPO


def ingest_examples(engine) -> None:
    ingest(
        engine=engine,
        records=iter_sources([str(REPO / "examples")]),
        namespace="default",
        task_type="default",
    )


def ingest_lines(engine, records: list[dict]) -> None:
    ingest(
        engine=engine,
        records=((f"r{i}", r) for i, r in enumerate(records)),
        namespace="default",
        task_type="default",
    )


def all_cards(engine) -> list[Card]:
    with Session(engine) as s:
        return list(s.execute(select(Card)).scalars())


def failed_task_runs(flow_run_id, *, expect: int, timeout_s: float = 30.0) -> list:
    """Failed task runs of a flow run (task states reach the API as events, a little late)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with get_client(sync_client=True) as client:
            tasks = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
        failed = [t for t in tasks if t.state and t.state.is_failed()]
        if len(failed) >= expect or time.monotonic() > deadline:
            return failed
        time.sleep(0.5)


def run_retrospect(**kw):
    """The retrospect flow's summary, whether the run ended Completed or Failed (dead letters)."""
    return run_summary(retrospect(RetrospectParams(**kw), return_state=True))
