"""Vector search by text: the embedder turns the text into a vector, the index finds cards."""

from __future__ import annotations

import uuid

from memory_core.embed.base import Embedder
from memory_core.index.base import VectorIndex


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
