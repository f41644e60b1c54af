"""The one card score: a card's standing (confidence, recency, use) whatever the query.

Retrieval (serve/retrieval.py) adds specificity, trust and text similarity on top of it,
fact search blends it with relevance, and decay's cap evicts the lowest of it in SQL
(decay/plan.py builds its expression with `standing` below, on columns instead of floats).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, overload

from sqlalchemy.sql.elements import ColumnElement

from memory_core.settings import RankingWeights


@dataclass
class ScoreTerms:
    """The parts of a card's standing and their weighted sum."""

    confidence: float
    recency: float
    use_frequency: float
    score: float


@overload
def standing(
    *, confidence: float, recency: float, use_frequency: float, w: RankingWeights
) -> float: ...


@overload
def standing(
    *,
    confidence: ColumnElement[Any],
    recency: ColumnElement[Any],
    use_frequency: ColumnElement[Any],
    w: RankingWeights,
) -> ColumnElement[Any]: ...


def standing(*, confidence: Any, recency: Any, use_frequency: Any, w: RankingWeights) -> Any:
    """w_c*confidence + w_r*recency + w_u*use_frequency, on floats or on SQL expressions."""
    return w.confidence * confidence + w.recency * recency + w.use_frequency * use_frequency


def recency(*, seen_at: datetime, now: datetime, half_life_days: float) -> float:
    """1 when just seen, halving every half-life (a future time counts as now)."""
    age_days = max((now - seen_at).total_seconds(), 0.0) / 86400
    return math.pow(0.5, age_days / half_life_days)


def ranking_terms(
    *,
    confidence: float,
    seen_at: datetime,
    use_count: int,
    now: datetime,
    max_uses: int,
    w: RankingWeights,
) -> ScoreTerms:
    """A card's standing: what retrieval ranks on and decay's cap keeps.

    seen_at is the last use, else the last update; use_frequency is the use count as a
    share of the namespace's most used card's."""
    rec = recency(seen_at=seen_at, now=now, half_life_days=w.recency_half_life_days)
    freq = use_count / max_uses if max_uses else 0.0
    score = standing(confidence=confidence, recency=rec, use_frequency=freq, w=w)
    return ScoreTerms(confidence, rec, freq, score)
