"""Card drafts, the extractor Protocol, and the signature that makes one lesson one card.

Shared by retrospection (which makes drafts) and the card writer and screen (which store and
check them), so neither package imports the other for its types."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_core.models.card import ActionStep, CardStatus, EvidenceTriple, FailureMode
from memory_core.models.trajectory import Outcome, Step, Trajectory
from memory_core.preconditions import normalise_expression, normalise_text
from memory_core.redact.fields import redact_steps


@dataclass(frozen=True)
class TrajectoryView:
    """What an extractor sees of one stored trajectory."""

    id: uuid.UUID
    namespace: str
    task_type: str
    agent_id: str | None
    outcome: Outcome
    steps: list[Step]


def view_of(row: Trajectory) -> TrajectoryView:
    """The extractor's view of a stored trajectory."""
    return TrajectoryView(
        id=row.id,
        namespace=row.namespace,
        task_type=row.task_type,
        agent_id=row.agent_id,
        outcome=Outcome(row.outcome),
        # secrets never reach an extractor, a prompt or a card: the view is redacted
        steps=[Step.model_validate(s) for s in redact_steps(row.steps)],
    )


@dataclass
class DraftCard:
    """A card proposed by an extractor, with the evidence that supports it."""

    pattern: str  # which decision point produced it, e.g. "pre_call_warning"
    scenario: str
    preconditions: list[str]
    action_sequence: list[ActionStep]
    expected_outcome: str
    actual_outcome: str
    failure_modes: list[FailureMode]
    confidence: float
    evidence: list[EvidenceTriple] = field(default_factory=list)
    signature_parts: tuple[str, ...] = ()
    provenance: dict[str, Any] = field(default_factory=dict)  # producer, model, prompt...
    status: CardStatus | None = None  # None: the stage's default status
    flags: list[str] = field(default_factory=list)  # why it is quarantined or rejected
    answer: str = ""  # the LLM's raw answer it came from: kept on its run when it is refused

    @property
    def evidence_only(self) -> bool:
        """True for evidence meant for a stored card: it never sets a card's content."""
        return False

    @property
    def signature(self) -> str:
        """Stable identity of the lesson: pattern, normalised preconditions, failure modes."""
        body = {
            "pattern": self.pattern,
            "pre": sorted(normalise_expression(p) for p in self.preconditions),
            "modes": sorted(normalise_text(f.mode) for f in self.failure_modes),
            "extra": list(self.signature_parts),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:40]


@dataclass
class Extraction:
    """What an extractor made of one trajectory, and what it cost."""

    drafts: list[DraftCard] = field(default_factory=list)
    calls: int = 0  # LLM calls actually made (cached answers cost none)
    cached: int = 0  # answers taken from the cache
    tokens_sent: int = 0  # prompt tokens the LLM reported for those calls
    tokens_received: int = 0
    tokens_saved: int = 0  # estimated tokens the pre-filter kept out of the prompts
    # an answer wrong by content, twice: (why, the raw answer); kept on the run, never parked
    rejected: tuple[str, str] | None = None


class Extractor(Protocol):
    """Turns one trajectory into zero or more card drafts (none when it taught nothing)."""

    name: str

    def extract(self, trajectory: TrajectoryView) -> Extraction:
        """The drafts this trajectory supports."""
        ...
