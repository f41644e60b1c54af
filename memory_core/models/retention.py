"""A namespace's retention policy, and what the nightly's retention last removed from it."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, utc_column


class NamespaceRetention(SQLModel, table=True):
    """How long a namespace keeps its raw runs and its uses (None: the settings' value), who set
    it, and the nightly's last removal (counts by kind, no content)."""

    __tablename__ = "namespace_retention"

    namespace: str = Field(primary_key=True, max_length=128)
    trajectories_days: float | None = None
    uses_days: float | None = None
    set_by: str | None = Field(default=None, max_length=128)
    set_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    last_run_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    last_removed: dict[str, int] = Field(default_factory=dict, sa_column=json_column())
