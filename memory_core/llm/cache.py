"""The answer cache in the database: written as soon as an answer parses, read before any call."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any, Protocol

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from memory_core.db import session_scope
from memory_core.models.columns import utcnow
from memory_core.models.llm_answer import LLMAnswer
from memory_core.models.trajectory import Trajectory


def cache_key(*, model: str, prompt_id: str, messages: list[dict[str, str]]) -> str:
    """Same model + same prompt version + same prompt text = same key."""
    blob = json.dumps({"model": model, "prompt": prompt_id, "messages": messages}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class AnswerCache(Protocol):
    """Where finished answers live, so a re-run never pays for them twice."""

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer, or None."""
        ...

    def put(
        self,
        *,
        key: str,
        trajectory_id: uuid.UUID | None,
        prompt_id: str,
        model: str,
        answer: dict[str, Any],
        prompt_tokens: int,
        completion_tokens: int,
        calls: int,
        namespace: str | None = None,
    ) -> None:
        """Store an answer (idempotent by key); namespace: whose text the prompt held (read
        off the trajectory when one is named)."""
        ...


class SQLAnswerCache:
    """AnswerCache on the project database (its own short transactions)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer, or None."""
        with Session(self.engine) as session:
            row = session.get(LLMAnswer, key)
            return dict(row.answer) if row else None

    def put(
        self,
        *,
        key: str,
        trajectory_id: uuid.UUID | None,
        prompt_id: str,
        model: str,
        answer: dict[str, Any],
        prompt_tokens: int,
        completion_tokens: int,
        calls: int,
        namespace: str | None = None,
    ) -> None:
        """Store an answer; a concurrent writer of the same key wins, ours is dropped."""
        ins = (pg_insert if self.engine.dialect.name == "postgresql" else sqlite_insert)(LLMAnswer)
        with session_scope(self.engine) as session:
            if namespace is None and trajectory_id is not None:
                namespace = session.execute(
                    select(Trajectory.namespace).where(col(Trajectory.id) == trajectory_id)
                ).scalar()
            session.execute(
                ins.on_conflict_do_nothing(index_elements=["cache_key"]),
                [
                    {
                        "cache_key": key,
                        "trajectory_id": trajectory_id,
                        "namespace": namespace,
                        "prompt_id": prompt_id,
                        "model": model,
                        "answer": answer,
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "calls": calls,
                        "created_at": utcnow(),
                    }
                ],
            )
