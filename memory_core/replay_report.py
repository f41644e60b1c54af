"""The report of a replay: per call, per trajectory, and the totals."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from memory_core.models.trajectory import Refusal


class Verdict(StrEnum):
    """What the memory did for one call."""

    hit = "hit"
    miss = "miss"
    noise = "noise"
    quiet = "quiet"


class ServedCard(BaseModel):
    """A card retrieval returned for a call, and whether it warned about the call's error."""

    card_id: uuid.UUID
    rank: int
    scenario: str
    score: float
    warned: bool


class CallReplay(BaseModel):
    """One tool call: its state, its error (if any), what was served, the verdict."""

    trajectory: str
    call: int  # index among the trajectory's tool calls
    step: int  # index among all its steps
    tool: str
    error: str | None = None
    signature: str | None = None
    code: str | None = None
    verdict: Verdict
    served: list[ServedCard]
    state: dict[str, Any]


class Totals(BaseModel):
    """Counts over calls; hit_rate = hits / failed calls, noise_rate = noise / succeeded."""

    trajectories: int = 0
    calls: int = 0
    failed: int = 0
    hit: int = 0
    miss: int = 0
    noise: int = 0
    quiet: int = 0

    @property
    def hit_rate(self) -> float | None:
        """Share of failed calls the memory warned about."""
        return round(self.hit / self.failed, 4) if self.failed else None

    @property
    def noise_rate(self) -> float | None:
        """Share of calls that succeeded and still got cards."""
        ok = self.calls - self.failed
        return round(self.noise / ok, 4) if ok else None

    def add(self, verdict: Verdict) -> None:
        """Count one call."""
        self.calls += 1
        self.failed += verdict in (Verdict.hit, Verdict.miss)
        setattr(self, verdict.value, getattr(self, verdict.value) + 1)


class TrajectoryReplay(BaseModel):
    """The calls of one trajectory and their totals."""

    key: str
    outcome: str
    totals: Totals
    calls: list[CallReplay]


class ReplayReport(BaseModel):
    """A replay of a file against one namespace."""

    namespace: str
    top_k: int
    pre_call_only: bool
    active_cards: int
    trajectories: list[TrajectoryReplay]
    totals: Totals
    hit_rate: float | None
    noise_rate: float | None
    refused: list[Refusal] = []
