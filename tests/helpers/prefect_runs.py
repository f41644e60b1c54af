"""Everything the Prefect API holds about a flow run, as the texts an operator reads in its UI:
artifacts, logs, states (the flow run's and each task run's, with their messages), task run
names."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

RUN_PARTS = ("artifacts", "logs", "states", "task_runs")


def _paged(read: Callable[[int], list[Any]]) -> list[Any]:
    out: list[Any] = []
    while True:
        page = read(len(out))
        out += page
        if len(page) < 200:
            return out


def read_run(flow_run_id: uuid.UUID) -> dict[str, list[str]]:
    """Everything the Prefect API holds about one flow run and its task runs, as texts."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.client.schemas.sorting import LogSort
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=30)  # the run's last log lines reach the API first
    out: dict[str, list[str]] = {p: [] for p in RUN_PARTS}
    with get_client(sync_client=True) as c:
        run = c.read_flow_run(flow_run_id)
        out["states"].append(f"{run.name} {json.dumps(run.parameters, default=str)}")
        for s in c.read_flow_run_states(flow_run_id):
            out["states"].append(f"{s.name}: {s.message}")
        tasks = _paged(lambda off: c.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            limit=200, offset=off))  # fmt: skip
        for t in tasks:
            out["task_runs"].append(t.name)
            for s in c.read_task_run_states(t.id):
                out["states"].append(f"{t.name} {s.name}: {s.message}")
        logs = _paged(lambda off: c.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])),
            limit=200, offset=off, sort=LogSort.TIMESTAMP_ASC))  # fmt: skip
        out["logs"] += [f"{g.name} {g.level} {g.message}" for g in logs]
        arts = _paged(lambda off: c.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])),
            limit=200, offset=off))  # fmt: skip
        for a in arts:
            data = a.data if isinstance(a.data, str) else json.dumps(a.data, ensure_ascii=False)
            out["artifacts"].append(f"{a.key} {a.description}\n{data}")
    return out
