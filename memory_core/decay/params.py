"""What one decay run does: the rules (from the settings, or per run), dry run, the clock."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, field_validator

from memory_core.settings import DecayRules

Rule = Literal["decay", "unused", "harms", "fade", "cap"]
# the order the rules run in: each sees what the ones before it changed
RULES: tuple[Rule, ...] = ("decay", "unused", "harms", "fade", "cap")


class DecayParams(DecayRules):
    """The rules plus how to run them: dry_run plans only; now freezes the clock (tests)."""

    dry_run: bool = False
    now: datetime | None = None

    @field_validator("now")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("now must be timezone-aware (UTC)")
        return v


class Change(BaseModel):
    """One change the stage makes (or would make) to one card."""

    card_id: uuid.UUID
    namespace: str
    rule: Rule
    confidence_before: float
    confidence_after: float
    status_before: str
    status_after: str
    tier_before: int
    tier_after: int
    idle_since: datetime
    score: float | None = None
    reason: str


class DecayReport(BaseModel):
    """What one run changed (or, dry, would change): counts per rule, and the changes listed."""

    run_id: uuid.UUID
    now: datetime
    namespace: str | None
    dry_run: bool
    counts: dict[str, int] = {}
    changes: list[Change] = []
    skipped: int = 0  # planned cards changed by others meanwhile: left for the next run
    skipped_ids: list[uuid.UUID] = []  # which, in key order (the first few: the list is capped)

    @property
    def total(self) -> int:
        """Changes over all rules."""
        return sum(self.counts.values())
