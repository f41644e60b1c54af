"""Spans of a trace still waiting for its root span (the OTLP receiver's buffer)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, new_id, utc_column, utcnow


class TraceSpan(SQLModel, table=True):
    """One received span, kept until its trace is ingested (root seen, or waited long enough)."""

    __tablename__ = "trace_span"
    __table_args__ = (UniqueConstraint("namespace", "trace_id", "span_id"),)

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    namespace: str = Field(max_length=128, index=True)
    trace_id: str = Field(max_length=64, index=True)
    span_id: str = Field(max_length=32)
    span: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    received_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
