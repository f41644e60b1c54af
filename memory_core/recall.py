"""Recall over what was said: every stored message is a searchable memory item.

The items are the message steps of the namespace's stored trajectories and conversations
(the trajectory table stays the source of truth; nothing new is stored). Each item is
rendered with its date and speaker, and searched at three scales fused by reciprocal rank:

* the turn alone: keyword (BM25, Snowball English stemming) and vector (the configured embedder);
* the turn in its context: vector similarity smoothed over its neighbours, and keyword
  search over windows of one and two turns either side (an answer often lives in the reply
  to a question, or a name in the turn before);
* optionally the facts extracted from them, each pointing back at the turn it came from.

Neighbours are turns of the same trajectory less than SESSION_GAP apart (or in the same
dated session). Vectors are derived data, cached per text under the data directory.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.embed.base import Embedder
from memory_core.models.trajectory import Trajectory

RRF_K = 60
SESSION_GAP = timedelta(hours=6)  # turns further apart than this are not each other's context
NEIGHBOUR_WEIGHT = 0.5  # a neighbour's vector similarity counts half
WINDOWS = (1, 2)  # keyword context windows: this many turns either side
CANDIDATES = 200  # per ranker, before fusion

_stemmer_per_thread = threading.local()  # a Stemmer instance is not thread-safe


def stem_words(words: list[str]) -> list[str]:
    """The Snowball English stems of the words ("painted", "painting", "paints" -> "paint")."""
    stemmer = getattr(_stemmer_per_thread, "stemmer", None)
    if stemmer is None:
        stemmer = _stemmer_per_thread.stemmer = Stemmer.Stemmer("english")
    stems: list[str] = stemmer.stemWords(words)
    return stems


@dataclass(frozen=True)
class MemoryItem:
    """One message as a searchable memory item."""

    trajectory_id: uuid.UUID
    trajectory_key: str
    step: int
    speaker: str
    text: str
    said_at: datetime | None = None
    turn_id: str | None = None

    def rendered(self) -> str:
        """What is searched: the date, the speaker and the words."""
        return f"{self.when()}{self.speaker}: {self.text}"

    def when(self) -> str:
        """The date and time of day as people write them: "[1:56 pm on 8 May, 2023] "."""
        t = self.said_at
        if t is None:
            return ""
        day = f"{t.day} {t:%B}, {t.year}"
        if (t.hour, t.minute) == (0, 0):
            return f"[{day}] "
        return f"[{t.hour % 12 or 12}:{t.minute:02d} {'am' if t.hour < 12 else 'pm'} on {day}] "


def load_items(*, engine: Engine, namespace: str) -> list[MemoryItem]:
    """Every message step of the namespace's trajectories, oldest trajectory first."""
    with Session(engine) as session:
        rows = session.execute(
            select(col(Trajectory.id), col(Trajectory.key), col(Trajectory.steps))
            .where(col(Trajectory.namespace) == namespace)
            .order_by(col(Trajectory.created_at), col(Trajectory.id))
        ).all()
    items: list[MemoryItem] = []
    for tid, key, steps in rows:
        for s in steps:
            if s.get("type") != "message" or not (s.get("text") or "").strip():
                continue
            ts = s.get("ts")
            items.append(
                MemoryItem(
                    trajectory_id=tid,
                    trajectory_key=key,
                    step=int(s.get("index", 0)),
                    speaker=str(s.get("speaker") or s.get("role") or ""),
                    text=str(s["text"]),
                    said_at=datetime.fromisoformat(ts) if isinstance(ts, str) else None,
                    turn_id=s.get("turn_id"),
                )
            )
    return items


def _neighbours(a: MemoryItem, b: MemoryItem) -> bool:
    if a.trajectory_id != b.trajectory_id:
        return False
    if a.said_at is None or b.said_at is None:
        return True
    return abs(a.said_at - b.said_at) < SESSION_GAP


class VectorCache:
    """Item vectors by text hash and model, kept in one .npz file (derived data)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        if path is not None and path.is_file():
            with np.load(path) as data:
                self.vectors = {k: data[k] for k in data.files}

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of the texts; only unseen texts go to the embedder."""
        keys = [hashlib.sha256(f"{embedder.model}\x1f{t}".encode()).hexdigest() for t in texts]
        todo = list(dict.fromkeys(k for k in keys if k not in self.vectors))
        if todo:
            by_key = dict(zip(keys, texts, strict=True))
            for k, v in zip(todo, embedder.embed([by_key[k] for k in todo]), strict=True):
                self.vectors[k] = np.asarray(v, dtype=np.float32)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                np.savez(self.path, **self.vectors)  # type: ignore[arg-type]
        if not keys:
            return np.zeros((0, embedder.dim or 1), dtype=np.float32)
        return np.stack([self.vectors[k] for k in keys])


def vector_cache_path(data_dir: Path, namespace: str) -> Path:
    """Where a namespace's item vectors are cached."""
    digest = hashlib.sha256(namespace.encode()).hexdigest()[:16]
    return data_dir / "recall" / f"{digest}.npz"


@dataclass
class ItemHit:
    """A memory item that answers the search, with the rankers that found it."""

    item: MemoryItem
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


class _Keywords:
    def __init__(self, texts: Sequence[str]) -> None:
        self.tokens = bm25s.tokenize(
            list(texts), stopwords="en", stemmer=stem_words, show_progress=False
        )
        self.bm25 = bm25s.BM25()
        self.bm25.index(self.tokens, show_progress=False)

    def scores(self, text: str) -> np.ndarray | None:
        words = bm25s.tokenize(
            [text], stopwords="en", stemmer=stem_words, return_ids=False, show_progress=False
        )[0]
        words = [w for w in words if w in self.tokens.vocab]
        if not words:
            return None
        return np.asarray(self.bm25.get_scores(words))


def _top(scores: np.ndarray, n: int) -> list[int]:
    n = min(n, len(scores))
    part = np.argpartition(-scores, n - 1)[:n]
    return [int(i) for i in part[np.argsort(-scores[part], kind="stable")] if scores[i] > 0]


class RecallIndex:
    """The items of one namespace, indexed at the turn and context scales."""

    def __init__(
        self,
        items: Sequence[MemoryItem],
        *,
        embedder: Embedder | None = None,
        cache: VectorCache | None = None,
    ) -> None:
        self.items = list(items)
        self.embedder = embedder
        texts = [i.rendered() for i in self.items]
        n = len(self.items)
        self.prev = np.array(
            [i > 0 and _neighbours(self.items[i - 1], self.items[i]) for i in range(n)], bool
        )
        self.next = np.append(self.prev[1:], False) if n else np.zeros(0, bool)
        self.keywords = {"turn": _Keywords(texts)} if n else {}
        for w in WINDOWS if n else ():
            self.keywords[f"window{w}"] = _Keywords(self._windows(w))
        self.vectors: np.ndarray | None = None
        if embedder is not None and n:
            self.vectors = (cache or VectorCache(None)).embed(embedder, texts)

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

    def rankings(self, text: str, *, vector: np.ndarray | None = None) -> dict[str, list[int]]:
        """Each ranker's best item indices for a query (its vector may be given)."""
        ranked: dict[str, list[int]] = {}
        for name, kw in self.keywords.items():
            scores = kw.scores(text)
            if scores is not None:
                ranked[f"keyword_{name}"] = _top(scores, CANDIDATES)
        if self.vectors is not None and self.embedder is not None:
            q = vector if vector is not None else self.embedder.embed([text])[0]
            sim = self.vectors @ np.asarray(q, dtype=np.float32)
            ranked["vector_turn"] = _top(sim + 1.0, CANDIDATES)  # shifted: cosine may be < 0
            ctx = sim.copy()
            ctx[1:] += NEIGHBOUR_WEIGHT * sim[:-1] * self.prev[1:]
            ctx[:-1] += NEIGHBOUR_WEIGHT * sim[1:] * self.next[:-1]
            ranked["vector_context"] = _top(ctx + 2.0, CANDIDATES)
        return ranked

    def search(
        self,
        text: str,
        *,
        top_k: int = 10,
        extra: dict[str, list[int]] | None = None,
        vector: np.ndarray | None = None,
    ) -> list[ItemHit]:
        """The items that best answer `text` (reciprocal-rank fusion of every ranker)."""
        ranked = self.rankings(text, vector=vector)
        ranked.update(extra or {})
        fused: dict[int, float] = {}
        for found in ranked.values():
            for rank, i in enumerate(found):
                fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        best = sorted(fused, key=lambda i: (-fused[i], i))[:top_k]
        return [
            ItemHit(
                item=self.items[i],
                score=round(fused[i], 6),
                ranks={
                    name: found.index(i) for name, found in ranked.items() if i in set(found[:50])
                },
            )
            for i in best
        ]

    def position(self) -> Callable[[uuid.UUID, int], int | None]:
        """Item index by (trajectory id, step), to map facts back to the turn they came from."""
        where = {(it.trajectory_id, it.step): n for n, it in enumerate(self.items)}
        return lambda tid, step: where.get((tid, step))


def fact_ranking(
    *, engine: Engine, namespace: str, text: str, index: RecallIndex, limit: int = 50
) -> list[int]:
    """The items the best-matching facts were extracted from, in the facts' order."""
    from memory_core.facts.search import search_facts  # facts import this module's neighbours

    where = index.position()
    out: list[int] = []
    for hit in search_facts(engine=engine, namespace=namespace, text=text, top_k=limit):
        src = hit.fact.provenance.get("source") or {}
        try:
            tid, step = uuid.UUID(str(src.get("trajectory_id"))), int(src["step"])
        except (KeyError, TypeError, ValueError):
            continue
        n = where(tid, step)
        if n is not None and n not in out:
            out.append(n)
    return out


def search_memory(
    *,
    engine: Engine,
    namespace: str,
    text: str,
    top_k: int = 10,
    embedder: Embedder | None = None,
    cache: VectorCache | None = None,
    with_facts: bool = True,
) -> list[ItemHit]:
    """Search a namespace's messages (and the facts taken from them) in one call."""
    index = RecallIndex(
        load_items(engine=engine, namespace=namespace), embedder=embedder, cache=cache
    )
    if not index.items:
        return []
    extra = {}
    if with_facts:
        extra["facts"] = fact_ranking(engine=engine, namespace=namespace, text=text, index=index)
    return index.search(text, top_k=top_k, extra=extra)
