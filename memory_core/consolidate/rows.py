"""What consolidation plans over and what a judge says of a pair: shared by the planner
(plan.py), the LLM judge (judge.py) and the stage, so neither of the first two imports the
other."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field


@dataclass(frozen=True)
class CardRow:
    """What planning reads of an active card."""

    card_id: uuid.UUID
    scenario: str
    preconditions: list[str]
    action_sequence: list[dict[str, Any]]
    failure_modes: list[dict[str, Any]]
    confidence: float
    evidence_count: int
    use_count: int
    success_count: int
    failure_count: int
    version: int
    created_at: Any
    signature: str = ""  # a hash of the lesson's content: the same in every run on the same data
    run_count: int = 0  # distinct runs among the evidence (evidence_count counts rows)


class PairJudgement(BaseModel):
    """How two cards relate, in the LLM's words."""

    relation: Literal["same", "contradicts", "refines", "unrelated"]
    reason: str = Field(default="", max_length=500)


# (older, newer) -> the judgement, or None when there is none to trust (nothing changes then)
PairJudge = Callable[[CardRow, CardRow], PairJudgement | None]
