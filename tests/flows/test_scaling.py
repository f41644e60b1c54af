"""Scaling out: LLM retrospection on a local Dask cluster gives the single-process result."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import delete, select
from sqlmodel import Session, SQLModel

from flows.naming import task_runner
from flows.params import RetrospectParams
from flows.retrospect import retrospect
from flows.settings import FlowSettings
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.card import Card
from tests.helpers import fake_model
from tests.helpers.data import REPO
from tests.helpers.scripted_llm import ScriptedLLM

distributed = pytest.importorskip("distributed")  # the `dask` extra (in `dev` too)


def _fresh_input(engine) -> None:
    with Session(engine) as s:
        for table in reversed(SQLModel.metadata.sorted_tables):
            if table.name != "alembic_version":
                s.execute(delete(table))
        s.commit()
    ingest(
        engine=engine,
        records=iter_sources([str(REPO / "examples")]),
        namespace="default",
        task_type="default",
    )


def _cards(engine) -> list[tuple[str, str, str, int]]:
    with Session(engine) as s:
        return sorted(
            (c.signature, c.scenario, c.status, c.evidence_count)
            for c in s.execute(select(Card)).scalars()
        )


def test_dask_cluster_retrospects_like_one_process(flow_env, engine, monkeypatch) -> None:
    with ScriptedLLM(fake_model.respond) as llm:
        for key, value in {
            "BASE_URL": llm.url,
            "MODEL": "scripted-1",
            "API_KEY": "sk-test",
            "MODE": "instead",
            "RETRY_DELAYS_S": "[0.05]",
        }.items():
            monkeypatch.setenv(f"HINDSIGHT_LLM__{key}", value)

        _fresh_input(engine)
        single = retrospect(RetrospectParams())
        expected = _cards(engine)
        calls_single = len(llm.requests)

        _fresh_input(engine)  # the same input again, the answer cache emptied too
        # worker processes (not threads): the tasks are pickled, run, and reported from them
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            runner = task_runner(
                FlowSettings(task_runner="dask", dask_address=cluster.scheduler_address)
            )
            started = time.monotonic()
            with distributed.get_task_stream(client) as stream:
                spread = retrospect.with_options(task_runner=runner)(RetrospectParams())
            took = time.monotonic() - started
        workers: dict[str, int] = {}
        for item in stream.data:
            workers[item["worker"]] = workers.get(item["worker"], 0) + 1
        got = _cards(engine)

    assert single.trajectories == spread.trajectories == 12
    assert spread.dead_letters == 0 and spread.cards_created == single.cards_created
    assert got == expected  # same cards, same evidence
    assert len({sig for sig, *_ in got}) == len(got)  # no duplicates
    assert len(llm.requests) == 2 * calls_single  # each trajectory's calls made once per run
    assert sum(workers.values()) >= 12 and len(workers) == 2, workers  # both did work
    print(f"dask, 2 worker processes: {took:.1f} s, tasks per worker {sorted(workers.values())}")
