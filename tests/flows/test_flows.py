"""The Prefect flows under a real Prefect test harness, on SQLite and PostgreSQL."""

from __future__ import annotations

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

from flows.nightly import nightly
from flows.params import NightlyParams, RetrospectParams
from flows.retrospect import retrospect
from memory_core.ingest.store import ingest, iter_sources
from memory_core.status import card_counts, trajectory_counts
from tests.helpers.data import REPO, tau_path


def test_nightly_on_examples_then_rerun_is_a_no_op(flow_env, engine) -> None:
    params = NightlyParams(input=[str(REPO / "examples")])
    first = nightly(params)
    assert [i.stored for i in first.ingested] == [12]
    assert first.retrospect.trajectories == 12 and first.retrospect.cards_created > 5
    cards = card_counts(engine=engine)
    second = nightly(params)
    assert [i.duplicates for i in second.ingested] == [12]
    assert second.retrospect.trajectories == 0 and second.retrospect.cards_created == 0
    assert card_counts(engine=engine) == cards
    assert trajectory_counts(engine=engine) == {"done": 12}


def test_retrospect_flow_names_its_runs_and_batches(flow_env, engine) -> None:
    ingest(
        engine=engine,
        records=iter_sources([str(tau_path())]),
        namespace="default",
        task_type="default",
    )
    state = retrospect(RetrospectParams(namespace="default", max_batches=1), return_state=True)
    summary = state.result()
    assert summary.batches == 1 and summary.trajectories == 140
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
        assert run.name.startswith("retrospect default ")
        tasks = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id]))
        )
    assert [t.name for t in tasks] == ["retrospect default batch 1"]
    assert all(t.state.is_completed() for t in tasks)
