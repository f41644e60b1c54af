"""Cached LLM answers: the same prompt (version, model, trajectory text) is never paid twice."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, utc_column, utcnow


class LLMAnswer(SQLModel, table=True):
    """One parsed answer, keyed by the hash of model + prompt version + the prompt itself."""

    __tablename__ = "llm_answer"

    cache_key: str = Field(primary_key=True, max_length=64)
    # the trajectory the prompt was about; None for prompts about cards (consolidation)
    trajectory_id: uuid.UUID | None = Field(default=None, foreign_key="trajectory.id", index=True)
    # whose text the prompt held: a namespace's deletion takes its answers, trajectory or not
    namespace: str | None = Field(default=None, max_length=128, index=True)
    prompt_id: str = Field(max_length=64)
    model: str = Field(max_length=128)
    answer: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 1
    created_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
