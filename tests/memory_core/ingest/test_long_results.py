"""A long tool result is cut to the observation limit; a JSON one stays valid JSON."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select
from sqlmodel import Session

from memory_core.facts.stage import extract_facts
from memory_core.ingest.formats import parse_record
from memory_core.ingest.limits import InputLimits
from memory_core.ingest.otlp.receive import ingest_spans
from memory_core.ingest.otlp.spans import decode
from memory_core.ingest.shrink import cut_observation, cut_text
from memory_core.ingest.store import ingest
from memory_core.models.card import Card
from memory_core.models.trajectory import Trajectory

LIMIT = 4000
RECORDS = [
    {
        "account_id": f"acct-{i}",
        "name": f"Holder {i}",
        "membership": "platinum" if i == 0 else "bronze",
        "history": [{"order": f"o-{i}-{j}", "total": j * 10.5} for j in range(4)],
        "note": "opened at the branch office " * 10,
    }
    for i in range(40)
]


def _chat_run(run_id: str, result: str, said: str = "Find account acct-0.") -> dict[str, Any]:
    call = {"id": "c1", "function": {"name": "search_accounts", "arguments": ""}}
    call["function"]["arguments"] = json.dumps({"account_id": "acct-0"})
    return {
        "id": run_id,
        "messages": [
            {"role": "user", "content": said},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": result},
            {"role": "assistant", "content": "Found it."},
        ],
    }


def _observations(engine) -> dict[str, str]:
    with Session(engine) as s:
        rows = s.execute(select(Trajectory)).scalars().all()
        return {
            r.key: step["observation"]
            for r in rows
            for step in r.steps
            if step.get("type") == "tool_call"
        }


def _ingest(engine, *records: dict[str, Any], limits: InputLimits | None = None):
    return ingest(
        engine=engine,
        records=[(f"r{i}", r) for i, r in enumerate(records)],
        namespace="ns",
        task_type="support",
        max_observation_chars=LIMIT,
        **({"limits": limits} if limits else {}),
    )


def test_a_long_json_list_is_stored_as_json_within_the_limit(engine) -> None:
    text = json.dumps(RECORDS)
    assert len(text) > 20_000
    steps_run = {"id": "s1", "steps": [{"type": "tool_call", "tool": "t", "observation": RECORDS}]}
    report = _ingest(engine, _chat_run("c1", text), steps_run)
    assert (report.stored, report.refused) == (2, [])
    for key, observation in _observations(engine).items():
        assert len(observation) <= LIMIT, key
        kept = json.loads(observation)
        *whole, marker = kept
        assert len(whole) >= 3 and whole == [
            json.loads(json.dumps(r)) for r in RECORDS[: len(whole)]
        ]
        assert marker == f"…[{len(RECORDS) - len(whole)} more items]"


def test_a_long_json_result_of_a_traced_tool_call_is_stored_as_json(engine) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    with tracer.start_as_current_span("invoke_agent support", attributes=agent):
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_accounts"}
        with tracer.start_as_current_span("execute_tool", attributes=tool) as span:
            span.set_attribute("gen_ai.tool.call.result", json.dumps({"results": RECORDS}))
    provider.shutdown()
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    report = ingest_spans(
        engine=engine,
        namespace="ns",
        spans=decode(body, "application/x-protobuf").spans,
        task_type="support",
        limits=InputLimits(max_observation_chars=LIMIT),
        wait=timedelta(minutes=5),
    )
    assert report.stored == 1
    (observation,) = _observations(engine).values()
    results = json.loads(observation)["results"]
    assert len(observation) <= LIMIT and results[0]["membership"] == "platinum"
    assert results[-1] == f"…[{len(RECORDS) - len(results) + 1} more items]"


def test_re_ingesting_the_same_record_changes_nothing(engine) -> None:
    run = _chat_run("c1", json.dumps({"results": RECORDS, "total": 40}))
    _ingest(engine, run)
    first = _observations(engine)
    again = _ingest(engine, run)
    assert (again.stored, again.duplicates) == (0, 1)
    assert _observations(engine) == first
    # the same input gives the same text, so a re-parse agrees with what was stored
    parsed = parse_record(
        run, name="r", namespace="ns", task_type="support", max_observation_chars=LIMIT
    )
    assert [s.observation for s in parsed.steps if s.type == "tool_call"] == [first["c1"]]
    assert json.loads(first["c1"])["total"] == 40


def test_a_record_in_a_long_result_corroborates_the_customer(engine) -> None:
    text = json.dumps(RECORDS)
    _ingest(engine, _chat_run("c1", text, said="Hello, I'm a platinum member."))
    report = extract_facts(engine=engine)
    assert report.corroborated == 1
    with Session(engine) as s:
        (fact,) = s.execute(select(Card).where(Card.kind == "fact")).scalars().all()
    assert (fact.subject, fact.standing) == ("acct-0", "corroborated")
    assert fact.provenance["corroboration"][0]["tool"] == "search_accounts"


def test_a_hostile_result_goes_in_cut_to_the_limit(engine) -> None:
    huge = [{"id": i, "v": "x" * 10} for i in range(200_000)]
    text = json.dumps(huge)
    assert len(text) > 5_000_000
    steps_run = {"id": "s1", "steps": [{"type": "tool_call", "tool": "t", "observation": huge}]}
    deep = {
        "id": "s2",
        "steps": [{"type": "tool_call", "tool": "t", "observation": "[" * 10**5 + "]" * 10**5}],
    }
    wide = InputLimits(max_field_chars=10**7)
    report = _ingest(engine, _chat_run("c1", text), steps_run, deep, limits=wide)
    assert (report.stored, report.refused) == (3, [])
    stored = _observations(engine)
    for key in ("c1", "s1"):
        kept = json.loads(stored[key])
        assert len(stored[key]) <= LIMIT and kept[0] == {"id": 0, "v": "x" * 10}
        assert kept[-1] == f"…[{200_000 - len(kept) + 1} more items]"
    assert stored["s2"] == cut_text("[" * 10**5 + "]" * 10**5, LIMIT)  # too deep: cut as text


def test_text_and_unfitting_json_are_cut_as_text() -> None:
    assert cut_observation("x" * 150, 100) == "x" * 100 + "…[truncated 50 chars]"
    assert cut_observation("short", 100) == "short"
    for text in (
        json.dumps({"n": int("9" * 3000)}),  # one key holding a huge number
        json.dumps({"k" * 500: 1}),  # a key longer than the limit
        "[" + "1," * 100 + "NaN]",  # not JSON
        "[" * 200 + "]" * 200,  # nested deeper than the walk goes
        '"' + "s" * 300 + '"',  # a JSON string is text
    ):
        assert cut_observation(text, 100) == cut_text(text, 100), text[:20]


def test_long_strings_and_many_keys_are_cut_with_markers() -> None:
    doc = {"title": "t", "body": "é" * 5000, "tail": "\ud800" + "z" * 5000}
    out = cut_observation(json.dumps(doc), 300)
    kept = json.loads(out)
    assert len(out) <= 300 and out.encode()  # a lone surrogate stays escaped, UTF-8 holds it
    assert kept["title"] == "t" and kept["body"].startswith("ééé")
    assert kept["body"].endswith(f"…[truncated {5000 - len(kept['body'].split('…')[0])} chars]")
    wide = {f"k{i}": i for i in range(100_000)}
    out = cut_observation(json.dumps(wide), 1000)
    kept = json.loads(out)
    assert len(out) <= 1000 and list(kept)[:3] == ["k0", "k1", "k2"]
    assert kept["…"] == f"…[{100_000 - len(kept) + 1} more keys]"


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=80,
)


@settings(max_examples=60, deadline=None)
@given(
    value=st.lists(_JSON, min_size=1) | st.dictionaries(st.text(max_size=8), _JSON),
    limit=st.integers(20, 600),
)
def test_any_json_result_is_valid_json_within_the_limit_or_cut_as_text(value, limit) -> None:
    text = json.dumps(value)
    out = cut_observation(text, limit)
    assert out == cut_observation(text, limit)
    if len(text) <= limit:
        assert out == text
    elif out != cut_text(text, limit):
        assert len(out) <= limit and isinstance(json.loads(out), type(value))
