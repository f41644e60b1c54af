"""Search a namespace's messages in one call, with the facts extracted from them."""

from __future__ import annotations

import uuid

from sqlalchemy.engine import Engine

from memory_core.embed.base import Embedder
from memory_core.facts.search import search_facts
from memory_core.recall.index import ItemHit, RecallIndex
from memory_core.recall.items import load_items
from memory_core.recall.vectors import VectorCache


def fact_ranking(
    *, engine: Engine, namespace: str, text: str, index: RecallIndex, limit: int = 50
) -> list[int]:
    """The items the best-matching facts were extracted from, in the facts' order."""
    where = index.position()
    out: list[int] = []
    # claims too: they point at the turn a person said them in, which is what recall returns
    hits = search_facts(
        engine=engine, namespace=namespace, text=text, top_k=limit, include_claims=True
    )
    for hit in hits:
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
        items=load_items(engine=engine, namespace=namespace), embedder=embedder, cache=cache
    )
    if not index.items:
        return []
    extra = {}
    if with_facts:
        extra["facts"] = fact_ranking(engine=engine, namespace=namespace, text=text, index=index)
    return index.search(text=text, top_k=top_k, extra=extra)
