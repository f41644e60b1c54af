"""Received spans: buffered per trace until the root span is in (or the wait runs out), then
ingested as trajectories, keyed so a trace sent twice, or a span arriving late, is stored once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.db import session_scope
from memory_core.ingest.limits import DEFAULT_LIMITS, InputLimits
from memory_core.ingest.otlp.mapping import trace_records
from memory_core.ingest.otlp.spans import Span
from memory_core.ingest.store import IngestReport, ingest
from memory_core.models.columns import new_id, utcnow
from memory_core.models.trace_span import TraceSpan


class TraceReport(IngestReport):
    """An ingest report plus the trace side: traces ingested (incomplete among them), spans
    still waiting for their root, spans rejected (no valid ids)."""

    traces: int = 0
    incomplete: int = 0
    waiting_spans: int = 0
    rejected_spans: int = 0


def group_by_trace(spans: Iterable[Span]) -> dict[str, list[Span]]:
    """Spans by trace id, each span once (the last copy of a repeated span id wins)."""
    out: dict[str, dict[str, Span]] = {}
    for s in spans:
        out.setdefault(s.trace_id, {})[s.span_id] = s
    return {trace: list(by_id.values()) for trace, by_id in out.items()}


def has_root(spans: Sequence[Span]) -> bool:
    """The trace's root span (no parent) is among its spans."""
    return any(not s.parent_span_id for s in spans)


def records_of(traces: dict[str, list[Span]], *, complete_only: bool) -> tuple[list[Any], int]:
    """(named records, incomplete traces) for the traces whose root is in, or all of them."""
    named: list[Any] = []
    incomplete = 0
    for trace_id, spans in traces.items():
        complete = has_root(spans)
        if complete_only and not complete:
            continue
        incomplete += not complete
        for i, record in enumerate(trace_records(trace_id, spans, complete=complete)):
            named.append((f"trace {trace_id}[{i}]", record))
    return named, incomplete


def ingest_spans(
    *,
    engine: Engine,
    namespace: str,
    spans: Sequence[Span],
    task_type: str,
    limits: InputLimits = DEFAULT_LIMITS,
    wait: timedelta | None,
    now: datetime | None = None,
) -> TraceReport:
    """Ingest what is ready: traces whose root span is in, and (wait set) traces waiting longer
    than `wait`, as incomplete. With wait None (a file, which holds all there is) every trace
    goes in at once; otherwise the rest are buffered in trace_span for a later request."""
    now = now or utcnow()
    traces = group_by_trace(spans)
    if wait is None:
        named, incomplete = records_of(traces, complete_only=False)
        return _ingest(engine, namespace, named, task_type, limits, len(traces), incomplete)
    _buffer(engine, namespace, spans, now)
    ready_ids = [t for t, group in traces.items() if has_root(group)]
    stale_ids = _stale(engine, namespace, now - wait)
    buffered = _load(engine, namespace, set(ready_ids) | set(stale_ids))
    named, incomplete = records_of(buffered, complete_only=False)
    report = _ingest(engine, namespace, named, task_type, limits, len(buffered), incomplete)
    # the buffer is emptied after the trajectories are committed: a crash in between ingests
    # the trace again next time, which its key turns into a duplicate
    with session_scope(engine) as session:
        session.execute(
            delete(TraceSpan).where(
                col(TraceSpan.namespace) == namespace, col(TraceSpan.trace_id).in_(list(buffered))
            )
        )
        report.waiting_spans = int(
            session.execute(
                select(func.count()).where(col(TraceSpan.namespace) == namespace)
            ).scalar_one()
        )
    return report


def flush_waiting(
    *, engine: Engine, task_type: str, wait: timedelta, limits: InputLimits = DEFAULT_LIMITS
) -> TraceReport:
    """Ingest every namespace's traces that waited longer than `wait` (the nightly's first
    step, so a trace whose root never came is not left behind when no request follows)."""
    report = TraceReport()
    with session_scope(engine) as session:
        namespaces = session.execute(select(col(TraceSpan.namespace)).distinct()).scalars().all()
    for ns in namespaces:
        part = ingest_spans(
            engine=engine, namespace=ns, spans=[], task_type=task_type, limits=limits, wait=wait
        )
        for name in ("stored", "duplicates", "traces", "incomplete", "waiting_spans"):
            setattr(report, name, getattr(report, name) + getattr(part, name))
        report.refused += part.refused
    return report


def _ingest(
    engine: Engine,
    namespace: str,
    named: list[Any],
    task_type: str,
    limits: InputLimits,
    traces: int,
    incomplete: int,
) -> TraceReport:
    base = ingest(
        engine=engine,
        records=named,
        namespace=namespace,
        task_type=task_type,
        max_observation_chars=limits.max_observation_chars,
        limits=limits,
    )
    return TraceReport(**base.model_dump(), traces=traces, incomplete=incomplete)


def _buffer(engine: Engine, namespace: str, spans: Sequence[Span], now: datetime) -> None:
    if not spans:
        return
    rows = {
        (s.trace_id, s.span_id): {
            "id": new_id(),
            "namespace": namespace,
            "trace_id": s.trace_id,
            "span_id": s.span_id,
            "span": s.to_json(),
            "received_at": now,
        }
        for s in spans
    }
    insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(TraceSpan).on_conflict_do_nothing(
        index_elements=["namespace", "trace_id", "span_id"]
    )
    with session_scope(engine) as session:
        session.execute(stmt, list(rows.values()))


def _stale(engine: Engine, namespace: str, before: datetime) -> list[str]:
    with session_scope(engine) as session:
        query = (
            select(col(TraceSpan.trace_id))
            .where(col(TraceSpan.namespace) == namespace)
            .group_by(col(TraceSpan.trace_id))
            .having(func.min(col(TraceSpan.received_at)) < before)
        )
        return list(session.execute(query).scalars().all())


def _load(engine: Engine, namespace: str, trace_ids: set[str]) -> dict[str, list[Span]]:
    if not trace_ids:
        return {}
    with session_scope(engine) as session:
        rows = session.execute(
            select(col(TraceSpan.span)).where(
                col(TraceSpan.namespace) == namespace, col(TraceSpan.trace_id).in_(trace_ids)
            )
        ).scalars()
        return group_by_trace(Span.from_json(dict(r)) for r in rows)


class TraceAnswer(BaseModel):
    """What /v1/traces answers in JSON: OTLP's partialSuccess, and what Hindsight did."""

    partialSuccess: dict[str, Any] = {}
    hindsight: TraceReport
