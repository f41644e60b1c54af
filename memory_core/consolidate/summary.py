"""What consolidation changed (dry run: would change, with the plan): one namespace as the
stage returns it, or a run's namespaces summed. The stage, the task, the flow and the CLI pass
this model as it is (no re-listed copies)."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel


class ConsolidateSummary(BaseModel):
    """What consolidation changed (dry run: would change, with the plan)."""

    namespaces: int = 0
    cards_seen: int = 0
    merges: int = 0
    absorbed: int = 0
    superseded: int = 0  # older cards a newer, contradicting one replaced (judged by the LLM)
    judged: int = 0
    unjudged: int = 0
    facts_superseded: int = 0
    deferred: int = 0  # changes whose cards others changed meanwhile: planned again next run
    deferred_ids: list[uuid.UUID] = []  # each by its survivor card, in plan order (capped)
    embedded: int = 0
    similarity: str = ""
    index: str = ""  # how the vector index was brought in line (or why it was not)
    dry_run: bool = False
    plan: list[dict[str, Any]] = []
    failures: list[str] = []  # namespaces whose task failed (the others went on)
    # several workers: the namespaces this run consolidated (with its merges in each), and
    # those another run held meanwhile
    ran: dict[str, int] = {}
    elsewhere: list[str] = []

    def add(self, other: ConsolidateSummary) -> None:
        """Count another namespace in."""
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.similarity = other.similarity or self.similarity
        self.index = "; ".join(x for x in (self.index, other.index) if x)
        self.deferred_ids += other.deferred_ids
        self.plan += other.plan
        self.failures += other.failures
        self.ran = {**self.ran, **other.ran}
        self.elsewhere += other.elsewhere


# the counts: summed as they are (the texts and lists are joined by `add`)
_SUMMED = [n for n, f in ConsolidateSummary.model_fields.items() if f.annotation is int]
