"""The query log: one row per served query (who asked, the state, what was served or withheld
with its score, how long retrieval took); the outcome stays on the query's use rows."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, utc_column, utcnow


class QueryLog(SQLModel, table=True):
    """A query that recorded its uses, written by the use writer beside them."""

    __tablename__ = "query_log"
    __table_args__ = (
        # the console pages newest first within a namespace, and within one key of it
        Index("ix_query_log_namespace_asked", "namespace", "asked_at"),
        Index("ix_query_log_namespace_key_asked", "namespace", "key_id", "asked_at"),
    )

    query_id: uuid.UUID = Field(primary_key=True)
    namespace: str = Field(max_length=128)
    asked_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    key_id: uuid.UUID | None = None  # the API key that asked (its name is on api_key)
    via: str = Field(default="api", max_length=16)
    # the state as a use row keeps it (serve.uses.use_context): short scalar values only
    state: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    # [[card id, score], ...] best first; withheld: the holdout's other arm
    served: list[Any] = Field(default_factory=list, sa_column=json_column())
    withheld: list[Any] = Field(default_factory=list, sa_column=json_column())
    latency_ms: float = 0.0  # retrieval in the service, up to the use being queued
