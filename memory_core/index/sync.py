"""Keep the vector index in step with the database: rebuild it, and report drift.

The served set is the active cards that have a stored vector under the model; the index
should hold exactly those. This module never embeds: memory_core.embed fills card_embedding.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from sqlalchemy import Select, func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.embed.base import Embedder
from memory_core.errors import InvalidInput
from memory_core.index.base import IndexPoint, VectorIndex
from memory_core.models.card import Card, CardStatus
from memory_core.models.embedding import CardEmbedding

BATCH = 1000


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did."""

    model: str
    namespace: str | None
    upserted: int
    deleted: int


@dataclass(frozen=True)
class Drift:
    """Differences between the served set and the index."""

    model: str
    namespace: str | None
    expected: int  # active cards with a stored vector under the model
    indexed: int  # points in the index (of the namespace)
    missing: list[uuid.UUID] = field(default_factory=list)  # should be there, is not
    stale: list[uuid.UUID] = field(default_factory=list)  # is there, should not be

    @property
    def missing_count(self) -> int:
        """How many served cards the index lacks."""
        return len(self.missing)

    @property
    def stale_count(self) -> int:
        """How many points belong to no served card."""
        return len(self.stale)

    @property
    def clean(self) -> bool:
        """True when the index holds exactly the served set."""
        return not self.missing and not self.stale


def stored_models(*, engine: Engine) -> dict[str, int]:
    """The models that have stored vectors, each with its dimension."""
    with Session(engine) as session:
        rows = session.execute(
            select(col(CardEmbedding.model), func.max(CardEmbedding.dim)).group_by(
                col(CardEmbedding.model)
            )
        ).all()
    return {m: int(d) for m, d in rows}


def index_model(
    *, engine: Engine, embedder: Embedder | None, model: str | None = None, field: str = "model"
) -> tuple[str, int]:
    """The model whose vectors the index holds (named, else the embedder's, else the only one
    stored) and their dimension; InvalidInput when it is ambiguous or nothing is stored."""
    stored = stored_models(engine=engine)
    if model is None and embedder is not None:
        model = embedder.model
    if model is None:
        if len(stored) != 1:
            known = ", ".join(sorted(stored)) or "none"
            raise InvalidInput(f"name the model (stored vectors: {known})", field=field)
        model = next(iter(stored))
    dim = stored.get(model) or (embedder.dim if embedder and embedder.model == model else 0)
    if not dim:
        raise InvalidInput(
            f"no card vectors stored under model {model!r}: nothing to index yet", field=field
        )
    return model, dim


def _served(model: str, namespace: str | None) -> Select[uuid.UUID, str, str, bytes]:
    q = (
        select(col(Card.card_id), col(Card.namespace), col(Card.kind), col(CardEmbedding.vector))
        .join(CardEmbedding, col(CardEmbedding.card_id) == col(Card.card_id))
        .where(col(Card.status) == CardStatus.active.value, col(CardEmbedding.model) == model)
    )
    return q if namespace is None else q.where(col(Card.namespace) == namespace)


def served_count(*, engine: Engine, model: str, namespace: str | None = None) -> int:
    """How many cards the index should hold."""
    with Session(engine) as session:
        sub = _served(model, namespace).subquery()
        return int(session.execute(select(func.count()).select_from(sub)).scalar_one())


def _served_ids(engine: Engine, model: str, namespace: str | None) -> set[uuid.UUID]:
    q = (
        select(col(Card.card_id))
        .join(CardEmbedding, col(CardEmbedding.card_id) == col(Card.card_id))
        .where(col(Card.status) == CardStatus.active.value, col(CardEmbedding.model) == model)
    )
    if namespace is not None:
        q = q.where(col(Card.namespace) == namespace)
    with Session(engine) as session:
        return set(session.execute(q).scalars())


def _served_batches(
    engine: Engine, model: str, namespace: str | None, dim: int
) -> Iterator[list[IndexPoint]]:
    # streamed in batches so a million cards never sit in memory at once
    with Session(engine) as session:
        result = session.execute(
            _served(model, namespace).order_by(col(Card.card_id)).execution_options(yield_per=BATCH)
        )
        for part in result.partitions(BATCH):
            batch = []
            for card_id, ns, kind, blob in part:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.size != dim:
                    raise InvalidInput(
                        f"stored vector of {vec.size} dimensions under model {model!r}, "
                        f"the index holds {dim}",
                        record=str(card_id),
                        field="card_embedding.vector",
                    )
                # the array itself: the index converts it once, in one call
                points = cast(Sequence[float], vec)
                batch.append(
                    IndexPoint(card_id=card_id, vector=points, namespace=ns, kind=kind, model=model)
                )
            yield batch


def rebuild_index(
    *,
    engine: Engine,
    index: VectorIndex,
    model: str,
    namespace: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> RebuildReport:
    """Upsert every served card's stored vector and delete points of cards no longer served."""
    total = served_count(engine=engine, model=model, namespace=namespace)
    served: set[uuid.UUID] = set()
    for batch in _served_batches(engine, model, namespace, index.dim):
        index.upsert(batch)
        served.update(p.card_id for p in batch)
        if on_progress:
            on_progress(len(served), total)
    # read the point ids after the upserts: a card activated meanwhile is kept, not deleted
    stale = sorted(index.ids(namespace=namespace) - served)
    for i in range(0, len(stale), BATCH):
        index.delete(stale[i : i + BATCH])
    return RebuildReport(model=model, namespace=namespace, upserted=len(served), deleted=len(stale))


def check_index(
    *, engine: Engine, index: VectorIndex, model: str, namespace: str | None = None
) -> Drift:
    """Compare the served set with the index: cards missing from it, and stale points."""
    expected = _served_ids(engine, model, namespace)
    points = index.ids(namespace=namespace)
    return Drift(
        model=model,
        namespace=namespace,
        expected=len(expected),
        indexed=len(points),
        missing=sorted(expected - points),
        stale=sorted(points - expected),
    )
