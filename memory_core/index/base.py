"""The vector index Protocol and the point it stores (one per card, keyed by the card id)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# payload keys; search filters on the first two inside the engine, never in Python
NAMESPACE = "namespace"
KIND = "kind"
MODEL = "model"


@dataclass(frozen=True)
class IndexPoint:
    """One card's vector and the payload the search filters on."""

    card_id: uuid.UUID
    vector: Sequence[float]
    namespace: str
    kind: str  # "experience" | "fact"
    model: str  # the embedding model that made the vector (stored in the payload)

    def payload(self) -> dict[str, str]:
        """The stored payload of this point."""
        return {NAMESPACE: self.namespace, KIND: self.kind, MODEL: self.model}


class VectorIndex(Protocol):
    """Cosine-similarity index of card vectors; the point id is the card id itself."""

    dim: int

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or overwrite the points (the same card id replaces the old point)."""
        ...

    def delete(self, card_ids: Sequence[uuid.UUID]) -> None:
        """Remove these cards' points; unknown ids are ignored."""
        ...

    def search(
        self, *, vector: Sequence[float], namespace: str, kind: str | None = None, limit: int = 10
    ) -> list[tuple[uuid.UUID, float]]:
        """The nearest cards of one namespace (and kind), best first, with cosine similarity."""
        ...

    def ids(self, *, namespace: str | None = None) -> set[uuid.UUID]:
        """Every point id (of one namespace), for the drift check."""
        ...

    def close(self) -> None:
        """Flush and release the index (the embedded engine's directory lock)."""
        ...
