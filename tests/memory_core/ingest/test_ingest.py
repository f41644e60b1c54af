"""Ingest on SQLite and PostgreSQL: both formats, idempotence, refusals that name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from memory_core.errors import InvalidInput
from memory_core.ingest.formats import parse_record
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.trajectory import Trajectory
from tests.helpers.data import REPO, tau_path, tau_runs


def _count(engine) -> int:
    with Session(engine) as s:
        return s.execute(select(func.count()).select_from(Trajectory)).scalar_one()


def test_tau_runs_go_in_once(engine) -> None:
    first = ingest(
        engine=engine, records=iter_sources([str(tau_path())]), namespace="ns", task_type="default"
    )
    assert (first.stored, first.duplicates, first.refused) == (140, 0, [])
    again = ingest(
        engine=engine, records=iter_sources([str(tau_path())]), namespace="ns", task_type="default"
    )
    assert (again.stored, again.duplicates) == (0, 140)
    assert _count(engine) == 140
    with Session(engine) as s:
        row = s.execute(select(Trajectory).limit(1)).scalar_one()
    assert row.source_format == "openai_chat" and row.status == "pending"
    assert row.outcome in ("success", "failure") and row.key.startswith("sha256:")
    assert {"task_id", "trial"} <= set(row.extra)  # nothing the record carried is dropped


def test_both_formats_and_folders(engine) -> None:
    report = ingest(
        engine=engine,
        records=iter_sources([str(REPO / "examples")]),
        namespace="default",
        task_type="default",
    )
    assert report.refused == [] and report.stored == 12
    with Session(engine) as s:
        formats = dict(
            s.execute(
                select(Trajectory.source_format, func.count()).group_by(Trajectory.source_format)
            ).all()
        )
        types = set(s.execute(select(Trajectory.task_type)).scalars())
    assert formats == {"openai_chat": 6, "steps": 6}
    assert types == {"deploy_service", "data_export", "customer_support"}


def test_a_bad_record_is_refused_by_name_and_the_rest_goes_in(engine, tmp_path: Path) -> None:
    good = tau_runs()[:3]
    broken = json.loads(json.dumps(good[0]))
    broken["traj"][3] = {"role": "assistant", "tool_calls": [{"id": "x", "function": {}}]}
    lines = [
        json.dumps(good[0]),
        "{not json",
        json.dumps(broken),
        json.dumps({"steps": []}),
        json.dumps(good[1]),
        json.dumps({"steps": [{"type": "tool_call", "args": {}}]}),
        json.dumps(good[2]),
    ]
    f = tmp_path / "mixed.jsonl"
    f.write_text("\n".join(lines))
    report = ingest(
        engine=engine, records=iter_sources([str(f)]), namespace="d", task_type="default"
    )
    assert report.stored == 3
    refused = {r.record: r.error for r in report.refused}
    assert set(refused) == {f"{f}:2", f"{f}:3", f"{f}:4", f"{f}:6"}
    assert "not valid JSON" in refused[f"{f}:2"]
    assert "field 'traj.3.tool_calls.0.function.name'" in refused[f"{f}:3"]
    assert "field 'steps'" in refused[f"{f}:4"]
    assert "field 'steps.0.tool'" in refused[f"{f}:6"]
    assert _count(engine) == 3


def test_generic_steps_detect_errors_and_keep_explicit_ones() -> None:
    rec = {
        "id": "r1",
        "outcome": "failure",
        "steps": [
            {
                "type": "tool_call",
                "tool": "fetch",
                "args": '{"url": "u"}',
                "observation": {"status": 503, "message": "busy"},
            },
            {
                "type": "tool_call",
                "tool": "fetch",
                "args": {"url": "u"},
                "error": "timed out",
                "ts": "2026-01-01T00:00:00",
            },
            {"type": "message", "role": "assistant", "content": "giving up"},
        ],
    }
    t = parse_record(rec, name="r", namespace="n", task_type="default")
    assert t.key == "r1" and t.outcome.value == "failure"
    assert t.steps[0].error == "status 503: busy" and t.steps[0].args == {"url": "u"}
    assert t.steps[1].error == "timed out" and t.steps[1].ts is not None
    assert t.steps[1].ts.tzinfo is not None and t.steps[2].text == "giving up"


def test_repeated_tool_call_ids_pair_in_order() -> None:
    msgs = [{"role": "user", "content": "go"}]
    for n in (1, 2):
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "same",
                        "type": "function",
                        "function": {"name": "probe", "arguments": json.dumps({"n": n})},
                    }
                ],
            }
        )
        msgs.append(
            {
                "role": "tool",
                "tool_call_id": "same",
                "name": "probe",
                "content": f"result {n}" if n == 2 else "Error: first failed",
            }
        )
    t = parse_record({"messages": msgs}, name="r", namespace="n", task_type="default")
    calls = [s for s in t.steps if s.type == "tool_call"]
    assert [(c.args, c.error, c.observation) for c in calls] == [
        ({"n": 1}, "Error: first failed", "Error: first failed"),
        ({"n": 2}, None, "result 2"),
    ]


def test_huge_observations_are_truncated_with_a_marker() -> None:
    rec = {"steps": [{"type": "tool_call", "tool": "dump", "observation": "x" * 10_000}]}
    t = parse_record(rec, name="r", namespace="n", task_type="default", max_observation_chars=100)
    assert t.steps[0].observation.endswith("…[truncated 9900 chars]")


@pytest.mark.parametrize(
    "record,field",
    [
        ([1, 2], None),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot"}]}, "messages.0.role"),
        ({"steps": [{"type": "tool_call", "tool": "t"}], "reward": "high"}, "reward"),
    ],
)
def test_refusals_name_the_field(record, field) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_record(record, name="file.json[7]", namespace="n", task_type="default")
    assert "record file.json[7]" in str(err.value)
    if field:
        assert f"field '{field}'" in str(err.value)
