"""Card vectors in the database: computed once per card text and model, reused by every run."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.db import session_scope
from memory_core.embed.base import Embedder, embedding_text, text_hash
from memory_core.models.card import Card
from memory_core.models.columns import utcnow
from memory_core.models.embedding import CardEmbedding

BATCH = 256
_TEXT_COLUMNS: tuple[Any, ...] = (
    Card.card_id,
    Card.scenario,
    Card.key,
    Card.query,
    Card.value,
    Card.action_sequence,
    Card.failure_modes,
)


def ensure_embeddings(
    *,
    engine: Engine,
    embedder: Embedder,
    namespace: str | None = None,
    statuses: Sequence[str] = ("active",),
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Embed the cards that have no vector for this model, or whose text changed; returns how
    many were embedded. Safe to interrupt: each batch commits on its own."""
    with Session(engine) as session:
        q = select(*_TEXT_COLUMNS).where(col(Card.status).in_(list(statuses)))
        if namespace is not None:
            q = q.where(col(Card.namespace) == namespace)
        rows = list(session.execute(q).all())
        stored = dict(
            session.execute(
                select(col(CardEmbedding.card_id), col(CardEmbedding.text_hash)).where(
                    col(CardEmbedding.model) == embedder.model
                )
            ).all()
        )
    todo = []
    for row in rows:
        text = embedding_text(row)
        h = text_hash(text)
        if stored.get(row.card_id) != h:
            todo.append((row.card_id, text, h))
    for i in range(0, len(todo), BATCH):
        chunk = todo[i : i + BATCH]
        vectors = embedder.embed([t for _, t, _ in chunk])
        now = utcnow()
        with session_scope(engine) as session:
            ids = [cid for cid, _, _ in chunk]
            session.execute(
                delete(CardEmbedding).where(
                    col(CardEmbedding.card_id).in_(ids), col(CardEmbedding.model) == embedder.model
                )
            )
            session.add_all(
                CardEmbedding(
                    card_id=cid,
                    model=embedder.model,
                    text_hash=h,
                    dim=len(vec),
                    vector=np.asarray(vec, dtype=np.float32).tobytes(),
                    created_at=now,
                )
                for (cid, _, h), vec in zip(chunk, vectors, strict=True)
            )
        if on_progress:
            on_progress(min(i + BATCH, len(todo)), len(todo))
    return len(todo)


def load_vectors(
    *, engine: Engine, model: str, card_ids: Sequence[uuid.UUID] | None = None
) -> dict[uuid.UUID, np.ndarray]:
    """Stored vectors of these cards (all, when None) under one model."""
    out: dict[uuid.UUID, np.ndarray] = {}
    with Session(engine) as session:
        q = select(col(CardEmbedding.card_id), col(CardEmbedding.vector)).where(
            col(CardEmbedding.model) == model
        )
        if card_ids is None:
            chunks: list[Sequence[uuid.UUID] | None] = [None]
        else:
            chunks = [card_ids[i : i + 5000] for i in range(0, len(card_ids), 5000)]
        for chunk in chunks:
            qq = q if chunk is None else q.where(col(CardEmbedding.card_id).in_(chunk))
            for cid, blob in session.execute(qq).all():
                out[cid] = np.frombuffer(blob, dtype=np.float32)
    return out
