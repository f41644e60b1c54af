"""SQLModel tables and their public/create shapes."""

from memory_core.models.api_key import ApiKey
from memory_core.models.backtest import BacktestFigures, CardBacktest
from memory_core.models.card import (
    ActionStep,
    Card,
    CardArchive,
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
from memory_core.models.card_change import CardChange
from memory_core.models.embedding import CardEmbedding
from memory_core.models.llm_answer import LLMAnswer
from memory_core.models.namespace_deletion import NamespaceDeletion
from memory_core.models.query_log import QueryLog
from memory_core.models.retention import NamespaceRetention
from memory_core.models.trace_span import TraceSpan
from memory_core.models.trajectory import (
    Outcome,
    Step,
    Trajectory,
    TrajectoryCreate,
    TrajectoryStatus,
)
from memory_core.models.validation import ValidationRun

__all__ = [
    "ActionStep",
    "ApiKey",
    "BacktestFigures",
    "Card",
    "CardArchive",
    "CardBacktest",
    "CardBase",
    "CardChange",
    "CardCreate",
    "CardEmbedding",
    "CardEvidence",
    "CardKind",
    "CardPublic",
    "CardStatus",
    "CardUse",
    "CardVersion",
    "EvidenceTriple",
    "FailureMode",
    "LLMAnswer",
    "NamespaceDeletion",
    "NamespaceRetention",
    "Outcome",
    "QueryLog",
    "Step",
    "TraceSpan",
    "Trajectory",
    "TrajectoryCreate",
    "TrajectoryStatus",
    "ValidationRun",
]
