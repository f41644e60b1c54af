"""API keys: only the hash of a key is stored; each key sees one namespace."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, new_id, utc_column, utcnow


class ApiKey(SQLModel, table=True):
    """A key handed to an agent or operator: its namespace, scopes and sha256 hash."""

    __tablename__ = "api_key"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    namespace: str = Field(max_length=128, index=True)
    scopes: list[str] = Field(default_factory=list, sa_column=json_column())
    key_hash: str = Field(max_length=64, unique=True)
    prefix: str = Field(max_length=16)  # the first characters, to tell keys apart in lists
    name: str = Field(default="", max_length=128)
    created_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    revoked_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    # when a server last checked the key (to within its key cache time): which keys are idle
    last_used_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
