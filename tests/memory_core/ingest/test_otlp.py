"""OTLP spans from the real OpenTelemetry SDK (protobuf as its exporter encodes them) become
trajectories: buffered until the root span is in, incomplete after the wait, stored once."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import func, select

from memory_core.db import session_scope
from memory_core.errors import InvalidInput
from memory_core.ingest.otlp.receive import ingest_spans
from memory_core.ingest.otlp.spans import decode, decode_json
from memory_core.models.columns import utcnow
from memory_core.models.trace_span import TraceSpan
from memory_core.models.trajectory import Trajectory
from tests.helpers.otel_agent import run_deploys

PROTOBUF = "application/x-protobuf"


def _finished(services=("billing-api",)):
    memory = InMemorySpanExporter()
    run_deploys(memory, list(services))
    return list(memory.get_finished_spans())


def _decoded(spans):
    return decode(encode_spans(spans).SerializeToString(), PROTOBUF).spans


def _runs(engine):
    with session_scope(engine) as session:
        return list(session.execute(select(Trajectory).order_by(Trajectory.key)).scalars())


def _waiting(engine):
    with session_scope(engine) as session:
        return session.execute(select(func.count()).select_from(TraceSpan)).scalar_one()


def _ingest(engine, spans, **kw):
    kw.setdefault("wait", timedelta(minutes=5))
    return ingest_spans(engine=engine, namespace="team-a", spans=spans, task_type="default", **kw)


def test_a_trace_waits_for_its_root_then_becomes_one_trajectory(engine) -> None:
    spans = _decoded(_finished())
    root = next(s for s in spans if not s.parent_span_id)
    children = [s for s in spans if s is not root]
    first = _ingest(engine, children)
    assert first.stored == 0 and first.waiting_spans == len(children) and _runs(engine) == []
    done = _ingest(engine, [root])
    assert (done.stored, done.traces, done.incomplete, done.waiting_spans) == (1, 1, 0, 0)
    [run] = _runs(engine)
    assert run.key == f"otel:{root.trace_id}" and run.outcome == "success"
    assert run.task_type == "deploy_service" and run.agent_id == "release-bot"
    calls = [(s["tool"], s.get("error")) for s in run.steps if s["type"] == "tool_call"]
    assert calls == [
        ("build_image", None),
        (
            "push_image",
            "RegistryError: HTTP 429 Too Many Requests: registry rate limit, retry after 30s",
        ),
        ("wait", None),
        ("push_image", None),
        ("deploy", None),
    ]
    assert run.steps[0]["args"] == {"service": "billing-api", "tag": "2.0.0"}
    assert json.loads(run.steps[0]["observation"]) == {"image": "registry.local/billing-api:2.0.0"}
    context = run.extra["otel"]["context"]
    assert {c["name"] for c in context} == {"chat gpt-4o", "load config"}  # kept, not steps
    assert run.extra["otel"]["complete"] is True
    # the same spans again, or a late copy of one: the trace is stored once
    again = _ingest(engine, spans)
    assert again.stored == 0 and again.duplicates == 1 and len(_runs(engine)) == 1


def test_a_trace_without_its_root_goes_in_incomplete_after_the_wait(engine) -> None:
    spans = _decoded(_finished())
    children = [s for s in spans if s.parent_span_id]
    early = utcnow() - timedelta(minutes=10)
    assert _ingest(engine, children, now=early).stored == 0
    nothing_yet = _ingest(engine, [], wait=timedelta(minutes=30))
    assert nothing_yet.stored == 0 and nothing_yet.waiting_spans == len(children)
    late = _ingest(engine, [], wait=timedelta(minutes=5))
    assert (late.stored, late.incomplete, late.waiting_spans) == (1, 1, 0)
    [run] = _runs(engine)
    assert run.outcome == "unknown" and run.extra["otel"]["complete"] is False
    assert next(s["tool"] for s in run.steps if s["type"] == "tool_call") == "build_image"
    assert _waiting(engine) == 0


def test_several_agent_invocations_in_one_trace_are_one_trajectory_each(engine) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("workflow"):
        for name, outcome in (("planner", "success"), ("coder", "failure")):
            agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
            with tracer.start_as_current_span(f"invoke_agent {name}", attributes=agent) as span:
                span.set_attribute("hindsight.outcome", outcome)
                tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"{name}_tool"}
                with tracer.start_as_current_span("execute_tool", attributes=tool):
                    pass
    provider.shutdown()
    report = _ingest(engine, _decoded(memory.get_finished_spans()))
    assert report.stored == 2
    runs = {r.agent_id: r for r in _runs(engine)}
    assert {a: r.outcome for a, r in runs.items()} == {"planner": "success", "coder": "failure"}
    assert [s["tool"] for s in runs["coder"].steps] == ["coder_tool"]
    assert runs["planner"].key.count(":") == 2  # otel:<trace>:<agent span>


def test_json_and_bad_bodies(engine) -> None:
    trace, span = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace,
                                "spanId": span,
                                "name": "execute_tool search",
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000001000000000",
                                "attributes": [
                                    {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}},
                                    {"key": "retries", "value": {"intValue": "2"}},
                                ],
                                "status": {"code": 2, "message": "timed out"},
                            },
                            {"traceId": "zz", "spanId": span, "name": "no valid id"},
                        ]
                    }
                ],
            }
        ]
    }
    decoded = decode_json(body)
    assert decoded.rejected == 1 and "traceId" in decoded.reason
    [only] = decoded.spans
    assert only.trace_id == trace and only.attributes["retries"] == 2
    report = _ingest(engine, decoded.spans)
    assert report.stored == 1  # the root (no parent) is in
    assert _runs(engine)[0].steps[0]["error"] == "timed out"
    assert _runs(engine)[0].outcome == "failure"
    with pytest.raises(InvalidInput, match="resourceSpans"):
        decode(b'{"spans": []}', "application/json")
    with pytest.raises(InvalidInput, match="protobuf"):
        decode(b"\xff\xff\xff", PROTOBUF)
    with pytest.raises(InvalidInput, match="content type"):
        decode(b"{}", "text/plain")


def test_the_nightly_ingests_traces_that_waited_too_long(settings, engine) -> None:
    from tasks.plain_night import waiting_traces_run

    spans = _decoded(_finished())
    children = [s for s in spans if s.parent_span_id]
    _ingest(engine, children, now=utcnow() - timedelta(hours=1))  # older than the 300 s wait
    fresh = _decoded(_finished(["search-api"]))
    # just received, it still waits; a request sweeps what waited past its wait (2 h here)
    _ingest(engine, [s for s in fresh if s.parent_span_id], wait=timedelta(hours=2))
    assert _runs(engine) == []
    report = waiting_traces_run(settings)
    assert (report.stored, report.duplicates) == (1, 0)
    [run] = _runs(engine)
    assert run.namespace == "team-a" and run.extra["otel"]["complete"] is False
    assert _waiting(engine) == len(fresh) - 1
    assert waiting_traces_run(settings).stored == 0  # nothing more has waited long enough


def test_a_wrapper_root_around_one_agent_takes_the_agents_name_and_outcome(engine) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import Status, StatusCode

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("http request"):  # status unset: says nothing
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}
        with tracer.start_as_current_span("invoke_agent triage", attributes=agent) as span:
            with tracer.start_as_current_span("execute_tool", attributes={"gen_ai.tool.name": "t"}):
                pass
            span.set_status(Status(StatusCode.ERROR, "gave up"))
    provider.shutdown()
    assert _ingest(engine, _decoded(memory.get_finished_spans())).stored == 1
    [run] = _runs(engine)
    assert (run.agent_id, run.outcome) == ("triage", "failure")
    assert run.key.count(":") == 1  # one trajectory for the trace


def test_malformed_fields_are_read_as_nothing_never_a_crash(engine) -> None:
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "startTimeUnixNano": "not a number",
        "endTimeUnixNano": "9" * 5000,
        "attributes": [
            {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}},
            {"key": "n", "value": {"intValue": {"no": 1}}},
            {"key": "list", "value": {"arrayValue": ["not", "an", "object"]}},
            {"key": "kv", "value": {"kvlistValue": "nope"}},
            {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "[" * 5000}},
        ],
        "events": "nope",
        "status": {"code": "STATUS_CODE_NONSENSE"},
    }
    body = {"resourceSpans": [{"resource": [], "scopeSpans": [{"spans": [span]}, "x"]}, 1]}
    [read] = decode_json(body).spans
    assert (read.start_ns, read.end_ns, read.status_code) == (0, 0, 0)
    assert (
        read.attributes["n"] == 0 and read.attributes["list"] == [] and read.attributes["kv"] == {}
    )
    assert _ingest(engine, [read]).stored == 1
    assert _runs(engine)[0].steps[0]["tool"] == "search"
