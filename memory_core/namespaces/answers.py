"""What the namespace routes answer (shared by the API and its typed client)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class NamespaceOut(BaseModel):
    """A namespace's cards and facts by status, trajectories, dead letters and live keys."""

    namespace: str
    cards: dict[str, int]
    facts: dict[str, int]
    trajectories: int
    dead_letters: int
    keys: int


class DeletionOut(BaseModel):
    """What a deletion removed: rows by table, snapshot files, index points."""

    namespace: str
    rows: dict[str, int]
    files: int
    vectors: int


class ImportOut(BaseModel):
    """What an import read by record type, what it added (the rest was already there), and the
    file's cards it did not store because the namespace holds another live card with the same
    signature."""

    namespace: str
    read: dict[str, int]
    added: dict[str, int]
    same_signature: list[str] = Field(default_factory=list)


class RetentionIn(BaseModel):
    """A namespace's own retention days (0: keep all; left out: unchanged); `clear` first
    returns both to the settings' values."""

    trajectories_days: float | None = Field(default=None, ge=0)
    uses_days: float | None = Field(default=None, ge=0)
    clear: bool = False


class RetentionOut(BaseModel):
    """A namespace's policy as applied (0: keep all), what it sets itself (None: the settings'),
    and what the nightly's retention last removed from it."""

    namespace: str
    trajectories_days: float
    uses_days: float
    own_trajectories_days: float | None = None
    own_uses_days: float | None = None
    set_by: str | None = None
    set_at: datetime | None = None
    last_run_at: datetime | None = None
    last_removed: dict[str, int] = {}
