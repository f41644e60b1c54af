"""What one decay run does: the rules (from the settings, or per run), dry run, the clock."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

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
    """What one decay run changed (dry run: would change, with the plan listed): the one model
    of the stage, from run_decay through the task and the flow to the CLI's JSON."""

    run_id: uuid.UUID | None = None  # the history rows' run (None on a dry run: none written)
    now: datetime | None = None
    dry_run: bool = False
    decayed: int = 0
    archived_unused: int = 0
    archived_cap: int = 0
    harmful_to_review: int = 0  # measured to harm (memory_core.effects): sent to review
    faded_no_effect: int = 0  # measured to change nothing: faded faster
    skipped: int = 0  # cards changed by others while the stage ran: planned again next run
    skipped_ids: list[uuid.UUID] = []  # the first of them, by id (capped)
    changes: list[Change] = []
    # several workers: the namespaces this run decayed (with the cards it changed in each),
    # and those another run held meanwhile
    ran: dict[str, int] = {}
    elsewhere: list[str] = []

    @classmethod
    def of_counts(cls, counts: dict[str, int], **fields: Any) -> DecayReport:
        """The report of a run whose plan had these counts per rule."""
        return cls(
            decayed=counts.get("decay", 0),
            archived_unused=counts.get("unused", 0),
            archived_cap=counts.get("cap", 0),
            harmful_to_review=counts.get("harms", 0),
            faded_no_effect=counts.get("fade", 0),
            **fields,
        )

    @property
    def counts(self) -> dict[Rule, int]:
        """Changes per rule, in rule order."""
        return {
            "decay": self.decayed,
            "unused": self.archived_unused,
            "harms": self.harmful_to_review,
            "fade": self.faded_no_effect,
            "cap": self.archived_cap,
        }

    @property
    def total(self) -> int:
        """Changes over all rules."""
        return sum(self.counts.values())

    def add(self, other: DecayReport) -> None:
        """Count another namespace's run in."""
        for name in (*_SUMMED, "skipped"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.run_id = self.run_id or other.run_id
        self.now = other.now or self.now
        self.skipped_ids = [*self.skipped_ids, *other.skipped_ids][:50]
        self.changes = [*self.changes, *other.changes]
        self.ran = {**self.ran, **other.ran}


_SUMMED = ("decayed", "archived_unused", "archived_cap", "harmful_to_review", "faded_no_effect")
