"""Conversations in: LoCoMo-shaped sessions and plain message lists, once each, refusals named."""

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
from tests.helpers.data import locomo_paths


def _ingest(engine, *paths: str):
    return ingest(
        engine=engine, records=iter_sources(list(paths)), namespace="ns", task_type="chat"
    )


def _parse(record):
    return parse_record(record, name="f.json[3]", namespace="n", task_type="chat")


@pytest.mark.parametrize("path", locomo_paths(), ids=lambda p: p.name)
def test_each_locomo_file_goes_in_once(engine, path: Path) -> None:
    records = json.loads(path.read_text())
    first = _ingest(engine, str(path))
    assert (first.stored, first.refused) == (len(records), [])
    again = _ingest(engine, str(path))
    assert (again.stored, again.duplicates) == (0, len(records))
    with Session(engine) as s:
        rows = list(s.execute(select(Trajectory)).scalars())
    assert {r.source_format for r in rows} == {"conversation"}
    for row in rows:
        steps = row.steps
        assert steps and all(st["type"] == "message" for st in steps)
        assert all(st["speaker"] and st["turn_id"] and st["ts"] for st in steps)
        assert [st["ts"] for st in steps] == sorted(st["ts"] for st in steps)
        assert len(row.extra["speakers"]) >= 2
    total = sum(len(v) for r in records for v in r["conversation"].values() if isinstance(v, list))
    assert sum(len(r.steps) for r in rows) == total


def _sessions() -> dict:
    return {
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "part_2": [{"speaker": "Bo", "turn": "b1", "text": "Later."}],
            "part_2_when": "9 June, 2024",
            "part_1": [
                {"speaker": "Ann", "turn_id": "a1", "text": "I live in Oslo."},
                {"speaker": "Bo", "turn_id": "a2", "text": "Nice."},
            ],
            "part_1_when": "1:00 pm on 2 May, 2024",
        },
        "labels": [{"q": "x"}],
    }


def test_sessions_are_found_by_structure_and_ordered_by_date() -> None:
    t = _parse(_sessions())
    assert t.source_format == "conversation"
    assert [(s.speaker, s.text) for s in t.steps] == [
        ("Ann", "I live in Oslo."),
        ("Bo", "Nice."),
        ("Bo", "Later."),
    ]
    assert t.steps[0].turn_id == "a1" and t.steps[0].ts.isoformat() == "2024-05-02T13:00:00+00:00"
    assert t.steps[2].ts.date().isoformat() == "2024-06-09"
    assert t.extra["not_stored"] == ["labels"] and t.key.startswith("sha256:")


def test_plain_message_lists(engine, tmp_path: Path) -> None:
    bare = [
        {"role": "user", "content": "I prefer tea.", "timestamp": "2024-03-01T09:00:00Z"},
        {"role": "assistant", "content": "Noted."},
    ]
    wrapped = {"id": "chat-7", "messages": [{"speaker": "Kim", "text": "Call me Kay."}]}
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    (tmp_path / "wrapped.jsonl").write_text(json.dumps(wrapped) + "\n")
    report = _ingest(engine, str(tmp_path))
    assert (report.stored, report.refused) == (2, [])
    assert _ingest(engine, str(tmp_path)).duplicates == 2
    with Session(engine) as s:
        rows = {r.key: r for r in s.execute(select(Trajectory)).scalars()}
        assert s.execute(select(func.count()).select_from(Trajectory)).scalar_one() == 2
    kim = rows["chat-7"]
    assert kim.source_format == "conversation"
    assert kim.steps[0]["speaker"] == "Kim" and kim.steps[0]["text"] == "Call me Kay."
    (other,) = [r for k, r in rows.items() if k != "chat-7"]
    assert [st["role"] for st in other.steps] == ["user", "assistant"]
    assert other.steps[0]["ts"].startswith("2024-03-01T09:00:00")


def test_messages_with_tool_calls_stay_openai_chat() -> None:
    rec = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
        ]
    }
    assert _parse(rec).source_format == "openai_chat"


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda r: r["conversation"]["part_1"].__setitem__(1, {"speaker": "Bo"}), "part_1.1.text"),
        (lambda r: r["conversation"]["part_1"][0].__setitem__("speaker", ""), "part_1.0"),
        (lambda r: r["conversation"].__setitem__("part_1_when", "someday soon"), "part_1_when"),
        (lambda r: r["conversation"]["part_2"].append("hello"), "conversation.part_2.1"),
        (lambda r: r.__setitem__("reward", "lots"), "reward"),
    ],
)
def test_a_malformed_conversation_is_refused_naming_record_and_field(mutate, field) -> None:
    rec = _sessions()
    mutate(rec)
    with pytest.raises(InvalidInput) as err:
        _parse(rec)
    assert "record f.json[3]" in str(err.value) and field in str(err.value)


def test_a_bad_conversation_in_a_file_is_refused_and_the_rest_goes_in(engine, tmp_path) -> None:
    bad = _sessions()
    bad["conversation"]["part_1"][0]["text"] = None
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps(_sessions()) + "\n" + json.dumps(bad) + "\n")
    report = _ingest(engine, str(f))
    assert report.stored == 1
    ((name, why),) = [(r.record, r.error) for r in report.refused]
    assert name == f"{f}:2" and "conversation.part_1.0" in why
