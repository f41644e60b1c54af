"""The recall index: one namespace's items at the turn and context scales, fused by rank."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memory_core.embed.base import Embedder
from memory_core.keywords import KeywordIndex
from memory_core.recall.items import MemoryItem, are_neighbours
from memory_core.recall.vectors import VectorCache

RRF_K = 60
NEIGHBOUR_WEIGHT = 0.5  # a neighbour's vector similarity counts half
WINDOWS = (1, 2)  # keyword context windows: this many turns either side
CANDIDATES = 200  # per ranker, before fusion
SHOWN_RANKS = 50  # a hit lists the rankers that placed it this high


@dataclass
class ItemHit:
    """A memory item that answers the search, with the rankers that found it."""

    item: MemoryItem
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


def top_indices(scores: np.ndarray, n: int) -> list[int]:
    """The indices of the n highest positive scores, best first (ties by index)."""
    n = min(n, len(scores))
    part = np.argpartition(-scores, n - 1)[:n]
    return [int(i) for i in part[np.argsort(-scores[part], kind="stable")] if scores[i] > 0]


class RecallIndex:
    """The items of one namespace, indexed at the turn and context scales."""

    def __init__(
        self,
        *,
        items: Sequence[MemoryItem],
        embedder: Embedder | None = None,
        cache: VectorCache | None = None,
    ) -> None:
        self.items = list(items)
        self.embedder = embedder
        texts = [i.rendered() for i in self.items]
        n = len(self.items)
        self.prev = np.array(
            [i > 0 and are_neighbours(self.items[i - 1], self.items[i]) for i in range(n)], bool
        )
        self.next = np.append(self.prev[1:], False) if n else np.zeros(0, bool)
        self.keywords = {"turn": KeywordIndex(texts=texts)} if n else {}
        for w in WINDOWS if n else ():
            self.keywords[f"window{w}"] = KeywordIndex(texts=self._windows(w))
        self.vectors: np.ndarray | None = None
        if embedder is not None and n:
            self.vectors = (cache or VectorCache()).embed(embedder=embedder, texts=texts)

    def _windows(self, radius: int) -> list[str]:
        out = []
        for i, item in enumerate(self.items):
            lo, hi = i, i
            while lo > 0 and i - lo < radius and self.prev[lo]:
                lo -= 1
            while hi + 1 < len(self.items) and hi - i < radius and self.prev[hi + 1]:
                hi += 1
            context = " ".join(f"{o.speaker}: {o.text}" for o in self.items[lo : hi + 1])
            out.append(f"{item.when()}{context}")
        return out

    def rankings(self, *, text: str, vector: np.ndarray | None = None) -> dict[str, list[int]]:
        """Each ranker's best item indices for a query (its vector may be given)."""
        ranked: dict[str, list[int]] = {}
        for name, kw in self.keywords.items():
            scores = kw.scores(text=text)
            if scores is not None:
                ranked[f"keyword_{name}"] = top_indices(scores, CANDIDATES)
        if self.vectors is not None and self.embedder is not None:
            q = vector if vector is not None else self.embedder.embed([text])[0]
            sim = self.vectors @ np.asarray(q, dtype=np.float32)
            ranked["vector_turn"] = top_indices(sim + 1.0, CANDIDATES)  # cosine may be < 0
            ctx = sim.copy()
            ctx[1:] += NEIGHBOUR_WEIGHT * sim[:-1] * self.prev[1:]
            ctx[:-1] += NEIGHBOUR_WEIGHT * sim[1:] * self.next[:-1]
            ranked["vector_context"] = top_indices(ctx + 2.0, CANDIDATES)
        return ranked

    def search(
        self,
        *,
        text: str,
        top_k: int = 10,
        extra: dict[str, list[int]] | None = None,
        vector: np.ndarray | None = None,
    ) -> list[ItemHit]:
        """The items that best answer `text` (reciprocal-rank fusion of every ranker)."""
        ranked = self.rankings(text=text, vector=vector)
        ranked.update(extra or {})
        fused: dict[int, float] = {}
        for found in ranked.values():
            for rank, i in enumerate(found):
                fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        best = sorted(fused, key=lambda i: (-fused[i], i))[:top_k]
        shown = {
            name: {i: r for r, i in enumerate(found[:SHOWN_RANKS])}
            for name, found in ranked.items()
        }
        return [
            ItemHit(
                item=self.items[i],
                score=round(fused[i], 6),
                ranks={name: at[i] for name, at in shown.items() if i in at},
            )
            for i in best
        ]

    def position(self) -> Callable[[uuid.UUID, int], int | None]:
        """Item index by (trajectory id, step), to map facts back to the turn they came from."""
        where = {(it.trajectory_id, it.step): n for n, it in enumerate(self.items)}
        return lambda tid, step: where.get((tid, step))
