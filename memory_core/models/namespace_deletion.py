"""The record of a namespace's deletion: who, when and how many rows of each kind, no content."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, new_id, utc_column, utcnow


class NamespaceDeletion(SQLModel, table=True):
    """One run of a namespace's deletion; the namespace is kept as its sha256 only."""

    __tablename__ = "namespace_deletion"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    namespace_sha256: str = Field(max_length=64, index=True)
    actor: str = Field(max_length=128)
    started_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    finished_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    rows: dict[str, int] = Field(default_factory=dict, sa_column=json_column())
    files: int = 0
    vectors: int = 0
