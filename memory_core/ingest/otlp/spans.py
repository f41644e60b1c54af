"""OTLP trace requests (protobuf or JSON) read into plain spans.

The JSON encoding is OTLP/JSON (hex ids, camelCase, values as `{"stringValue": ...}`); ids in
base64 (the protobuf library's canonical JSON) are read too. A span without a valid trace or
span id is counted as rejected, never an error: the rest of the request still goes in."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from memory_core.errors import InvalidInput

STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


@dataclass
class Span:
    """One span, as the mapping needs it (attributes flattened to plain values)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    status_code: int = STATUS_UNSET
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The span as a JSON object (the buffer's column)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Span:
        """A span back from its JSON object."""
        return cls(**data)


@dataclass
class Decoded:
    """The spans of one request, and how many were rejected and why (the first reason)."""

    spans: list[Span] = field(default_factory=list)
    rejected: int = 0
    reason: str = ""


def _hex_id(raw: Any, size: int) -> str | None:
    """An id as lower-case hex of `size` bytes, from hex or base64 text or raw bytes."""
    if isinstance(raw, bytes):
        data = raw
    elif isinstance(raw, str) and raw:
        if len(raw) == size * 2:
            try:
                data = bytes.fromhex(raw)
            except ValueError:
                return None
        else:
            try:
                data = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                return None
    else:
        return None
    if len(data) != size or not any(data):
        return None
    return data.hex()


def _int(raw: Any) -> int:
    """An OTLP integer (a number or its decimal string, as OTLP/JSON writes 64-bit ones); 0
    for anything else: a malformed field is no reason to refuse the span."""
    if isinstance(raw, bool):
        return 0
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and len(raw) <= 20 and raw.strip().lstrip("-").isdigit():
        return int(raw)
    return 0


def _values(container: Any) -> list[Any]:
    values = container.get("values") if isinstance(container, dict) else None
    return values if isinstance(values, list) else []


def _value(v: Any) -> Any:
    """An OTLP AnyValue (JSON form) as a plain value."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return _int(v["intValue"])
    if "arrayValue" in v:
        return [_value(x) for x in _values(v["arrayValue"])]
    if "kvlistValue" in v:
        return _attributes(_values(v["kvlistValue"]))
    return None


def _attributes(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {
        str(a["key"]): _value(a.get("value"))
        for a in items
        if isinstance(a, dict) and isinstance(a.get("key"), str)
    }


def _status_code(raw: Any) -> int:
    code = _STATUS_NAMES.get(raw, _int(raw)) if isinstance(raw, str) else _int(raw)
    return code if 0 <= code <= 2 else STATUS_UNSET


def decode_json(body: Any) -> Decoded:
    """Spans from an OTLP/JSON ExportTraceServiceRequest (a parsed JSON object)."""
    if not isinstance(body, dict) or not isinstance(body.get("resourceSpans"), list):
        raise InvalidInput("an OTLP trace request needs 'resourceSpans' (a list)", field="body")
    out = Decoded()
    for rs in body.get("resourceSpans") or []:
        if not isinstance(rs, dict):
            continue
        res = rs.get("resource")
        resource = _attributes(res.get("attributes") if isinstance(res, dict) else None)
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
        for ss in scopes if isinstance(scopes, list) else []:
            spans = ss.get("spans") if isinstance(ss, dict) else None
            for raw in spans if isinstance(spans, list) else []:
                _add(out, raw, resource)
    return out


def _add(out: Decoded, raw: Any, resource: dict[str, Any]) -> None:
    if not isinstance(raw, dict):
        out.rejected += 1
        out.reason = out.reason or "a span is not an object"
        return
    trace_id, span_id = _hex_id(raw.get("traceId"), 16), _hex_id(raw.get("spanId"), 8)
    if trace_id is None or span_id is None:
        out.rejected += 1
        out.reason = out.reason or "a span without a valid traceId or spanId"
        return
    given_status, given_events = raw.get("status"), raw.get("events")
    status: dict[str, Any] = given_status if isinstance(given_status, dict) else {}
    events: list[Any] = given_events if isinstance(given_events, list) else []
    out.spans.append(
        Span(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=_hex_id(raw.get("parentSpanId"), 8) or "",
            name=str(raw.get("name") or ""),
            start_ns=_int(raw.get("startTimeUnixNano")),
            end_ns=_int(raw.get("endTimeUnixNano")),
            attributes=_attributes(raw.get("attributes")),
            events=[
                {
                    "name": str(e.get("name") or ""),
                    "time_ns": _int(e.get("timeUnixNano")),
                    "attributes": _attributes(e.get("attributes")),
                }
                for e in events
                if isinstance(e, dict)
            ],
            status_code=_status_code(status.get("code")),
            status_message=str(status.get("message") or ""),
            resource=resource,
        )
    )


def decode_protobuf(body: bytes) -> Decoded:
    """Spans from a binary OTLP ExportTraceServiceRequest (the official message classes)."""
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise InvalidInput(f"not an OTLP protobuf trace request: {exc}", field="body") from exc
    # the protobuf JSON form differs from OTLP/JSON only in its ids (base64), which _hex_id
    # reads; an empty request has no resourceSpans key at all
    return decode_json({"resourceSpans": [], **MessageToDict(request)})


def decode(body: bytes, content_type: str) -> Decoded:
    """Spans from a request body by its content type (application/json or x-protobuf)."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/x-protobuf":
        return decode_protobuf(body)
    if kind == "application/json":
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(f"the body is not JSON: {exc}", field="body") from exc
        return decode_json(parsed)
    raise InvalidInput(
        f"content type {kind or '(none)'!r}: send application/json or application/x-protobuf",
        field="content-type",
    )
