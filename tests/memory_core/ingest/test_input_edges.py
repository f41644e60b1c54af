"""Hard input edges on SQLite and PostgreSQL: refused with the record and field named (never a
500), and the good records of the same batch or the same ingest still stored."""

from __future__ import annotations

import json

import httpx
import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from memory_api.app import create_app
from memory_core.ingest.limits import InputLimits
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.trajectory import Trajectory
from memory_core.serve.service import MemoryService
from tests.helpers.cli import hindsight
from tests.helpers.data import tau_path
from tests.helpers.serve import LiveServer, keys_for

STEPS = [{"type": "tool_call", "tool": "lookup", "observation": "ok"}]


def _run(rid: str, **extra) -> dict:
    return {"id": rid, "steps": STEPS, **extra}


def _count(engine) -> int:
    with Session(engine) as s:
        return s.execute(select(func.count()).select_from(Trajectory)).scalar_one()


@pytest.fixture
def api(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    with LiveServer(create_app(svc)) as server:
        yield server, keys_for(engine)


BAD_RECORDS = [
    (
        '{"id":"nul","steps":[{"type":"tool_call","tool":"t","observation":"a\\u0000b"}]}',
        "steps.0.observation",
        "NUL",
    ),
    (
        '{"id":"sur","steps":[{"type":"tool_call","tool":"t","error":"\\ud800"}]}',
        "steps.0.error",
        "surrogate",
    ),
    (json.dumps(_run("x" * 300)), "id", "256"),
    ('{"id":"inf","reward":1e309,"steps":[{"type":"tool_call","tool":"t"}]}', "reward", "finite"),
    ('{"id":"nan","reward":NaN,"steps":[{"type":"tool_call","tool":"t"}]}', "reward", "finite"),
    (
        '{"id":"k","metadata":{"a\\u0000":1},"steps":[{"type":"tool_call","tool":"t"}]}',
        "metadata.a",
        "NUL",
    ),
    (
        json.dumps(_run("deep", metadata={"x": json.loads("[" * 100 + "]" * 100)})),
        "metadata.x",
        "nested",
    ),
    (json.dumps(_run("meta", metadata={"blob": "y" * 70_000})), "metadata", "bytes"),
    (json.dumps(_run("agent", metadata={"agent_id": "a" * 200})), "metadata.agent_id", "128"),
]


@pytest.mark.parametrize(("raw", "field", "why"), BAD_RECORDS)
def test_a_bad_record_is_refused_and_the_good_one_of_the_batch_stored(api, engine, raw, field, why):
    server, keys = api
    body = f"[{json.dumps(_run('good-1'))}, {raw}]"
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post(
            "/v1/trajectories",
            content=body,
            headers={
                "Authorization": f"Bearer {keys['write']}",
                "content-type": "application/json",
            },
        )
    assert r.status_code == 202, r.text
    [refused] = r.json()["refused"]
    assert refused["record"] == "trajectories[1]"
    assert f"field '{field}" in refused["error"] and why in refused["error"], refused
    assert r.json()["stored"] == 1 and _count(engine) == 1


@pytest.mark.parametrize(
    ("method", "path", "body", "code"),
    [
        ("POST", "/v1/facts", '{"key":"a\\u0000","value":"v"}', 422),
        ("POST", "/v1/facts", '{"key":"a","value":"\\ud800"}', 422),
        ("POST", "/v1/facts", '{"key":"a","value":"v","confidence":NaN}', 422),
        ("POST", "/v1/cards", '{"scenario":"a\\u0000","action_sequence":[{"tool":"x"}]}', 422),
        ("POST", "/v1/cards/query", '{"task_state":{"a\\ud800":1}}', 422),
        ("POST", "/v1/cards/query", '{"task_state":{"a":Infinity}}', 422),
        ("POST", "/v1/facts/search", '{"text":"a\\u0000"}', 422),
        ("GET", "/v1/cards?q=a%00b", None, 400),
        ("GET", "/v1/cards?status=%ED%A0%80", None, 400),
        ("POST", "/v1/trajectories", "[" * 10_000 + "]" * 10_000, 400),
        (
            "POST",
            "/v1/trajectories",
            '{"id":"only","steps":[{"type":"tool_call","tool":"t","observation":"\\u0000"}]}',
            400,
        ),
    ],
)
def test_edges_answer_4xx_naming_the_field(api, method, path, body, code) -> None:
    server, keys = api
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.request(
            method,
            path,
            content=body,
            headers={
                "Authorization": f"Bearer {keys['write']}",
                "content-type": "application/json",
            },
        )
    assert r.status_code == code, r.text
    r.json()  # a JSON answer, never the raw input echoed back unencodable
    if body and body.startswith("[" * 1000):  # the parser's own error named nothing
        assert "nests deeper than" in r.json()["detail"], r.text


def test_nesting_is_measured_outside_strings() -> None:
    from memory_api.errors import nesting_beyond

    assert nesting_beyond(b'{"a": "[[[[[[[[[[[[\\"[[[[[["}', 3) is None
    assert nesting_beyond(b'[[[["x"]]]]', 3) == 3
    assert nesting_beyond(b"[]" * 50, 3) is None  # many brackets, never deep


def test_messages_are_cut_at_the_cap(engine) -> None:
    long = {"id": "long", "messages": [{"role": "user", "content": "z" * 50_000}]}
    report = ingest(
        engine=engine,
        records=[("long", long)],
        namespace="ns",
        task_type="t",
        limits=InputLimits(max_message_chars=1000),
    )
    assert report.stored == 1
    with Session(engine) as s:
        [row] = s.execute(select(Trajectory)).scalars()
    text = row.steps[0]["text"]
    assert len(text) < 1100 and "truncated 49000 chars" in text


def test_ingest_reports_each_bad_file_and_stores_the_good_one(env_for, tmp_path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 10_000 + "]" * 10_000)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"id": "caf\xe9", "steps": []}')
    prose = tmp_path / "notes.json"
    prose.write_text("\n".join(f"line {i} of a plain text file" for i in range(200)))
    nul = tmp_path / "nul.jsonl"
    nul.write_text(
        json.dumps(_run("n1", metadata={"k": "a\x00b"})) + "\n" + json.dumps(_run("ok-2"))
    )
    proc = hindsight(
        env_for, "ingest", str(tau_path()), str(deep), str(latin), str(prose), str(nul),
        "-f", "json", check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["stored"] == 141  # the tau runs and the good line
    refused = {r["record"]: r["error"] for r in out["refused"]}
    assert set(refused) == {str(deep), str(latin), str(prose), f"{nul}:1"}, refused
    assert "nested too deep" in refused[str(deep)]
    assert "not UTF-8" in refused[str(latin)]
    assert "200 line(s), none parsed" in refused[str(prose)]
    assert "field 'metadata.k'" in refused[f"{nul}:1"]
    assert "Traceback" not in proc.stderr


def test_ingest_api_helpers_refuse_what_cannot_be_read(tmp_path) -> None:
    f = tmp_path / "mixed.jsonl"
    f.write_text("\n".join(["{bad"] * 8 + [json.dumps(_run("fine"))]))
    names = [n for n, _ in iter_sources([str(f)])]
    # the good line, five bad lines named, then one line counting the rest
    assert names[0] == f"{f}:9" and len(names) == 7 and names[-1] == f"{f}:*"


def test_a_file_with_a_byte_order_mark_is_read(env_for, engine, tmp_path) -> None:
    f = tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps([_run("bom-1"), _run("bom-2")]).encode())
    lines = tmp_path / "bom.jsonl"
    lines.write_bytes(b"\xef\xbb\xbf" + json.dumps(_run("bom-3")).encode() + b"\n")
    proc = hindsight(env_for, "ingest", str(f), str(lines), "-f", "json", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["stored"] == 3 and _count(engine) == 3


@pytest.mark.parametrize("content", ["", "  \n\n", "[]"])
def test_an_empty_file_says_no_records_and_exits_2(env_for, engine, tmp_path, content) -> None:
    f = tmp_path / "empty.json"
    f.write_text(content)
    proc = hindsight(env_for, "ingest", str(f), "-f", "json", check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [refusal] = json.loads(proc.stdout)["refused"]
    assert refusal["record"] == str(f) and "no records" in refusal["error"]
    assert _count(engine) == 0


def test_an_empty_folder_says_no_records_and_exits_2(env_for, tmp_path) -> None:
    (tmp_path / "none").mkdir()
    proc = hindsight(env_for, "ingest", str(tmp_path / "none"), check=False)
    assert proc.returncode == 2 and "no records" in proc.stderr, proc.stdout + proc.stderr


def test_the_api_refuses_an_empty_batch_naming_it(api, engine) -> None:
    server, keys = api
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post(
            "/v1/trajectories", json=[], headers={"Authorization": f"Bearer {keys['write']}"}
        )
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "invalid_input" and "no records" in r.json()["detail"]
    assert _count(engine) == 0
