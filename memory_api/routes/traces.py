"""OpenTelemetry in: OTLP/HTTP trace export (`/v1/traces`, JSON or protobuf) with an API key."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from memory_api.routes.deps import Caller, ServiceDep
from memory_core.ingest.otlp.receive import TraceAnswer, TraceReport

router = APIRouter(tags=["ingest"])
PROTOBUF = "application/x-protobuf"
_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {"schema": {"type": "object", "description": "OTLP/JSON"}},
        PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
    },
}


def _protobuf_answer(report: TraceReport) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTracePartialSuccess,
        ExportTraceServiceResponse,
    )

    answer = ExportTraceServiceResponse()
    if report.rejected_spans or report.refused:
        answer.partial_success.CopyFrom(
            ExportTracePartialSuccess(
                rejected_spans=report.rejected_spans, error_message=_why(report)
            )
        )
    data: bytes = answer.SerializeToString()
    return data


def _why(report: TraceReport) -> str:
    reasons = [r.error for r in report.refused[:3]]
    if report.rejected_spans:
        reasons.insert(0, f"{report.rejected_spans} span(s) without a valid traceId or spanId")
    return "; ".join(reasons)


@router.post(
    "/v1/traces",
    response_model=TraceAnswer,
    openapi_extra={"requestBody": _BODY},
    responses={200: {"content": {PROTOBUF: {}}}},
)
async def export_traces(request: Request, who: Caller, service: ServiceDep) -> Response:
    """OTLP/HTTP trace export (write scope): GenAI spans become trajectories, one per trace or
    per agent invocation, once the root span is in. Answers in the request's encoding."""
    body = await request.body()
    kind = request.headers.get("content-type", "")
    report = await to_thread.run_sync(
        lambda: service.ingest_traces(principal=who, body=body, content_type=kind)
    )
    if kind.split(";")[0].strip().lower() == PROTOBUF:
        return Response(_protobuf_answer(report), media_type=PROTOBUF)
    partial = (
        {"rejectedSpans": report.rejected_spans, "errorMessage": _why(report)}
        if report.rejected_spans or report.refused
        else {}
    )
    answer = TraceAnswer(partialSuccess=partial, hindsight=report)
    return Response(answer.model_dump_json(), media_type="application/json")
