"""SQLModel tables and their public/create shapes."""

from memory_core.models.card import (
    ActionStep,
    Card,
    CardBase,
    CardCreate,
    CardEvidence,
    CardKind,
    CardPublic,
    CardStatus,
    CardUse,
    CardVersion,
    EvidenceTriple,
    FailureMode,
)
from memory_core.models.llm_answer import LLMAnswer
from memory_core.models.trajectory import (
    Outcome,
    Step,
    Trajectory,
    TrajectoryCreate,
    TrajectoryStatus,
)

__all__ = [
    "ActionStep",
    "Card",
    "CardBase",
    "CardCreate",
    "CardEvidence",
    "CardKind",
    "CardPublic",
    "CardStatus",
    "CardUse",
    "CardVersion",
    "EvidenceTriple",
    "FailureMode",
    "LLMAnswer",
    "Outcome",
    "Step",
    "Trajectory",
    "TrajectoryCreate",
    "TrajectoryStatus",
]
