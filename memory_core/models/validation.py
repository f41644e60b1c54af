"""The record of each validation run: counts, failed expectations, the cards they caught."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, new_id, utc_column, utcnow


class ValidationRun(SQLModel, table=True):
    """One pass of the expectation suite over a batch of drafts."""

    __tablename__ = "validation_run"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    namespace: str | None = Field(default=None, max_length=128)
    created_at: datetime = Field(default_factory=utcnow, sa_column=utc_column(index=True))
    evaluated: int = 0
    activated: int = 0
    review: int = 0
    rejected: int = 0
    rule_failures: dict[str, int] = Field(default_factory=dict, sa_column=json_column())
    failed_cards: dict[str, list[str]] = Field(default_factory=dict, sa_column=json_column())
    docs_path: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
