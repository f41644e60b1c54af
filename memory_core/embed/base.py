"""The embedder Protocol and the text of a card that gets embedded."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Protocol


class Embedder(Protocol):
    """Turns texts into unit-length vectors of a fixed dimension."""

    model: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalised vector per text, in order."""
        ...


def embedding_text(card: Any) -> str:
    """What a card means, in words: scenario, key/query/value, actions and failure modes."""
    parts = [card.scenario or ""]
    if card.key:
        parts.append(" ".join(p for p in (card.key, card.query or "", card.value or "") if p))
    tools = [str(a.get("tool", "")) for a in card.action_sequence or [] if isinstance(a, dict)]
    if tools:
        parts.append("actions: " + ", ".join(t for t in tools if t))
    modes = [str(m.get("mode", "")) for m in card.failure_modes or [] if isinstance(m, dict)]
    if modes:
        parts.append("fails: " + "; ".join(m for m in modes if m))
    return "\n".join(p for p in parts if p)[:2000]


def text_hash(text: str) -> str:
    """The key that tells whether a stored vector is still the card's."""
    return hashlib.sha256(text.encode()).hexdigest()
