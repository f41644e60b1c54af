"""Vector search by text: the embedder turns the text into a vector, the index finds cards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Engine

from memory_core.embed.base import Embedder
from memory_core.embed.factory import NO_EMBEDDER, build_embedder
from memory_core.errors import IndexUnavailable
from memory_core.index.base import VectorIndex
from memory_core.index.factory import open_index
from memory_core.index.sync import stored_models
from memory_core.settings import Settings


class IndexedSimilarity:
    """SimilarCards (see memory_core.facts.search) over a vector index."""

    def __init__(self, *, index: VectorIndex, embedder: Embedder) -> None:
        self.index = index
        self.embedder = embedder

    def similar(
        self, *, namespace: str, text: str, kind: str, limit: int
    ) -> list[tuple[uuid.UUID, float]]:
        """The cards of this namespace and kind nearest to the text, best first."""
        (vector,) = self.embedder.embed([text])
        return self.index.search(vector=vector, namespace=namespace, kind=kind, limit=limit)


@contextmanager
def vector_search(
    *, settings: Settings, engine: Engine
) -> Iterator[tuple[IndexedSimilarity | None, str]]:
    """Vector search for a command or request, or None and why (keyword search then)."""
    embedder = build_embedder(settings)
    if embedder is None:
        yield None, NO_EMBEDDER
        return
    dim = embedder.dim or stored_models(engine=engine).get(embedder.model, 0)
    if not dim:
        yield None, "no vectors stored yet (nightly consolidation or `index rebuild` makes them)"
        return
    try:
        index = open_index(settings, dim=dim)
    except IndexUnavailable as exc:
        yield None, f"vector index unavailable ({exc}); keyword search only"
        return
    try:
        yield IndexedSimilarity(index=index, embedder=embedder), ""
    finally:
        index.close()
