"""OpenTelemetry in, end to end: an agent instrumented with the real SDK and its OTLP/HTTP
exporter (nothing of Hindsight but the endpoint and the key header) posts to a real server;
a nightly run learns cards from those traces, which an agent then gets from the API."""

from __future__ import annotations

import httpx
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select

from hindsight.client import Client, QueryRequest
from memory_api.app import create_app
from memory_core.db import session_scope
from memory_core.models.trajectory import Trajectory
from memory_core.serve.service import MemoryService
from tests.helpers.cli import hindsight
from tests.helpers.otel_agent import run_deploys
from tests.helpers.serve import LiveServer, keys_for


def _runs(engine, namespace="team-a"):
    with session_scope(engine) as session:
        query = select(Trajectory).where(Trajectory.namespace == namespace)
        return list(session.execute(query).scalars())


def test_an_agent_traced_with_opentelemetry_only_gets_cards_after_a_nightly(
    settings, engine, env_for, prefect_api
) -> None:
    keys = keys_for(engine)
    with LiveServer(create_app(MemoryService(engine=engine, settings=settings))) as server:
        exporter = OTLPSpanExporter(
            endpoint=f"{server.url}/v1/traces",
            headers={"Authorization": f"Bearer {keys['write']}"},
        )
        run_deploys(exporter)  # protobuf, one span per request, children before the root
    runs = _runs(engine)
    assert len(runs) == 3 and {r.outcome for r in runs} == {"success"}
    assert all(r.extra["otel"]["complete"] for r in runs)
    hindsight({**env_for, **prefect_api}, "nightly")
    with (
        LiveServer(create_app(MemoryService(engine=engine, settings=settings))) as server,
        Client(server.url, keys["read"]) as hs,
    ):
        state = {"task_type": "deploy_service", "tool": "push_image"}
        hits = hs.query_cards(QueryRequest(task_state=state)).cards
    assert hits, "no card learned from the traces"
    assert any("push_image" in str(h.card.preconditions) for h in hits)
    assert any(
        "429" in (fm.get("mode", "") + fm.get("handling", ""))
        for h in hits
        for fm in h.card.failure_modes
    ) or any(step.get("tool") == "wait" for h in hits for step in h.card.action_sequence)


def test_json_protobuf_keys_and_refusals(settings, engine) -> None:
    keys = keys_for(engine)
    memory = InMemorySpanExporter()
    run_deploys(memory, ["billing-api"])
    request = encode_spans(memory.get_finished_spans())
    with LiveServer(create_app(MemoryService(engine=engine, settings=settings))) as server:
        url = f"{server.url}/v1/traces"
        proto = {"content-type": "application/x-protobuf"}
        body = request.SerializeToString()
        assert httpx.post(url, content=body, headers=proto).status_code == 401
        read_only = {**proto, "authorization": f"Bearer {keys['read']}"}
        assert httpx.post(url, content=body, headers=read_only).status_code == 403
        r = httpx.post(
            url, content=body, headers={**proto, "authorization": f"Bearer {keys['write']}"}
        )
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
        answer = ExportTraceServiceResponse()
        answer.ParseFromString(r.content)
        assert answer.partial_success.rejected_spans == 0
        auth = {"authorization": f"Bearer {keys['write']}"}
        bad = httpx.post(url, content=b"{}", headers={**auth, "content-type": "text/plain"})
        assert bad.status_code == 400 and bad.json()["field"] == "content-type"
        with Client(server.url, keys["write"]) as hs:
            # the same trace as protobuf JSON (base64 ids) through the typed client: stored once
            again = hs.export_traces(httpx.Response(200, content=MessageToJson(request)).json())
            assert again.hindsight.duplicates == 1 and again.hindsight.stored == 0
            other = hs.export_traces({"resourceSpans": [{"scopeSpans": [{"spans": [{}]}]}]})
            assert other.partialSuccess["rejectedSpans"] == 1
    assert len(_runs(engine)) == 1


def test_cli_ingests_a_trace_file(env_for, engine, tmp_path) -> None:
    memory = InMemorySpanExporter()
    run_deploys(memory, ["billing-api", "search-api"])
    spans = list(memory.get_finished_spans())
    # one export request a line, as a file exporter writes them; the last trace's root is cut
    lines = [MessageToJson(encode_spans(spans[:8]), indent=None)]
    lines.append(MessageToJson(encode_spans(spans[8:-1]), indent=None))
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = hindsight(env_for, "ingest", "--format", "otlp", str(path))
    assert "2" in out.stdout
    runs = sorted(_runs(engine, "default"), key=lambda r: r.extra["otel"]["complete"])
    assert [r.extra["otel"]["complete"] for r in runs] == [False, True]
    assert [r.outcome for r in runs] == ["unknown", "success"]
    plain = tmp_path / "run.json"
    plain.write_text('{"steps": [{"type": "tool_call", "tool": "x"}]}')
    refused = hindsight(env_for, "ingest", "--format", "otlp", str(plain), check=False)
    assert refused.returncode == 2 and "resourceSpans" in refused.stdout


def test_a_protobuf_body_full_of_bracket_bytes_is_not_read_as_json(settings, engine) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    keys = keys_for(engine)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span(
        "execute_tool parse",
        attributes={"gen_ai.tool.name": "parse", "gen_ai.tool.call.result": "{" * 2000},
    ):
        pass
    provider.shutdown()
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    headers = {
        "content-type": "application/x-protobuf",
        "authorization": f"Bearer {keys['write']}",
    }
    with LiveServer(create_app(MemoryService(engine=engine, settings=settings))) as server:
        r = httpx.post(f"{server.url}/v1/traces", content=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    assert len(_runs(engine)) == 1
