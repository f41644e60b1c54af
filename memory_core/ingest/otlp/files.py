"""Trace files: what the OpenTelemetry Collector's file exporter writes (one OTLP/JSON
ExportTraceServiceRequest a line) read among the other records of an ingest."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from memory_core.errors import InvalidInput
from memory_core.ingest.otlp.spans import Span, decode_json


def is_trace_export(record: Any) -> bool:
    """An OTLP trace request (it carries resourceSpans), not a trajectory."""
    return isinstance(record, dict) and "resourceSpans" in record


class TraceCollector:
    """Takes the trace exports out of a stream of records (their spans collected here) and
    passes the rest on; only_traces: any other record is passed on as a refusal naming it."""

    def __init__(self, *, only_traces: bool) -> None:
        self.only_traces = only_traces
        self.spans: list[Span] = []
        self.exports = 0
        self.rejected = 0

    def filter(self, records: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
        """The records that are not trace exports (refusals included)."""
        for name, record in records:
            if is_trace_export(record):
                try:
                    decoded = decode_json(record)
                except InvalidInput as exc:
                    yield name, InvalidInput(str(exc), record=name)
                    continue
                self.exports += 1
                self.spans += decoded.spans
                self.rejected += decoded.rejected
            elif self.only_traces and not isinstance(record, InvalidInput):
                why = "not an OTLP trace export (no 'resourceSpans')"
                yield name, InvalidInput(why, record=name)
            else:
                yield name, record
