"""What the namespace routes answer (shared by the API and its typed client)."""

from __future__ import annotations

from pydantic import BaseModel


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
    """What an import read by record type, and what it added (the rest was already there)."""

    namespace: str
    read: dict[str, int]
    added: dict[str, int]
