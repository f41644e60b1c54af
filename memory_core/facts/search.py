"""Fact search: keyword (BM25) and, with an embedder, vector similarity, fused by rank, then
blended with the decay-aware card score (confidence, recency, use)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel
from sqlalchemy import func, or_, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.cards.query import to_public
from memory_core.cards.score import ranking_terms
from memory_core.db import read_session
from memory_core.errors import InvalidInput
from memory_core.facts.as_of import facts_as_of
from memory_core.facts.conflicts import conflicts_of, preference
from memory_core.keywords import KeywordIndex
from memory_core.models.card import Card, CardKind, CardPublic, CardStatus, FactStanding
from memory_core.models.columns import utcnow
from memory_core.screen.provenance import trust
from memory_core.settings import RankingWeights

RRF_K = 60  # the usual reciprocal-rank-fusion constant
RELEVANCE_WEIGHT = 0.7  # the rest is the card score: a relevant fact beats a popular one
# a fact reaches an agent only when the text is about it: a vector neighbour below this
# cosine, sharing no keyword, is no answer (the nearest of unrelated facts is still unrelated)
MIN_SIMILARITY = 0.35


class SimilarCards(Protocol):
    """Vector search over cards (the index); scores are cosine similarities."""

    def similar(
        self, *, namespace: str, text: str, kind: str, limit: int
    ) -> list[tuple[uuid.UUID, float]]:
        """The cards of this namespace and kind nearest to the text, best first."""
        ...


class FactHit(BaseModel):
    """A fact that answers the search, with the parts of its score."""

    fact: CardPublic
    score: float
    keyword_rank: int | None = None
    vector_rank: int | None = None
    conflicts_with: list[str] = []  # claims this one contradicts (the newer is preferred)


def fact_text(card: Card) -> str:
    """What a fact's search matches on."""
    return " ".join(p for p in (card.key or "", card.query or "", card.value or "") if p)


def _keyword_ranks(cards: Sequence[Card], text: str) -> dict[uuid.UUID, tuple[int, float]]:
    """Each matching fact's BM25 rank and its score as a share of the best one's."""
    found = KeywordIndex(texts=[fact_text(c) for c in cards]).ranked(text=text, limit=100)
    if not found:
        return {}
    top = found[0][1]
    return {cards[i].card_id: (rank, score / top) for rank, (i, score) in enumerate(found)}


def search_facts(
    *,
    engine: Engine,
    namespace: str,
    text: str,
    top_k: int = 5,
    include_superseded: bool = False,
    include_claims: bool = False,
    vectors: SimilarCards | None = None,
    weights: RankingWeights | None = None,
    now: datetime | None = None,
    as_of: datetime | None = None,
) -> list[FactHit]:
    """The facts that best answer `text`; superseded, forgotten and expired ones are hidden
    unless include_superseded, claims (a speaker's word alone) unless include_claims; with
    as_of, the facts that were active at that moment (memory_core.facts.as_of)."""
    if not text.strip():
        raise InvalidInput("search text is empty", field="text")
    if not 1 <= top_k <= 100:
        raise InvalidInput("top_k must be within 1..100", field="top_k")
    now, weights = now or utcnow(), weights or RankingWeights()
    statuses = [CardStatus.active.value]
    if include_superseded:
        statuses += [CardStatus.superseded.value]
    with read_session(engine) as session:
        q = select(Card).where(
            col(Card.namespace) == namespace,
            col(Card.kind) == CardKind.fact.value,
            col(Card.status).in_(statuses),
        )
        if not include_superseded:
            q = q.where(or_(col(Card.valid_until).is_(None), col(Card.valid_until) > now))
        if not include_claims:
            q = q.where(
                or_(col(Card.standing).is_(None), col(Card.standing) != FactStanding.claim.value)
            )
        cards = list(session.execute(q).scalars())
        if as_of is not None:
            cards = facts_as_of(session, namespace=namespace, at=as_of)
            if not include_claims:
                cards = [c for c in cards if c.standing != FactStanding.claim.value]
        # the most used fact scales the use term (read over the facts, through their index:
        # over every card of the namespace it cost 70-140 ms at 100,000 cards)
        max_uses = (
            session.execute(
                select(func.max(Card.use_count)).where(
                    col(Card.namespace) == namespace, col(Card.kind) == CardKind.fact.value
                )
            ).scalar()
            or 0
        )
    if not cards:
        return []
    by_id = {c.card_id: c for c in cards}
    # a rank alone would put a fact sharing one common word next to the one the text is about:
    # each list's contribution is its rank's, scaled by the match's strength (BM25 share, cosine)
    keyword = _keyword_ranks(cards, text)
    ranks: dict[str, dict[uuid.UUID, tuple[int, float]]] = {"keyword": keyword, "vector": {}}
    if vectors is not None:
        near = vectors.similar(namespace=namespace, text=text, kind="fact", limit=100)
        close = [c for c in near if c[0] in by_id and c[1] >= MIN_SIMILARITY]
        ranks["vector"] = {cid: (r, sim) for r, (cid, sim) in enumerate(close)}
    fused: dict[uuid.UUID, float] = {}
    for found in ranks.values():
        for cid, (rank, strength) in found.items():
            fused[cid] = fused.get(cid, 0.0) + strength / (RRF_K + rank + 1)
    if not fused:
        return []
    best = max(fused.values())
    hits = []
    for cid, rrf in fused.items():
        card = by_id[cid]
        terms = ranking_terms(
            confidence=card.confidence,
            seen_at=card.last_used_at or card.updated_at,
            use_count=card.use_count,
            now=now,
            max_uses=max_uses,
            w=weights,
        )
        score = RELEVANCE_WEIGHT * rrf / best + (1 - RELEVANCE_WEIGHT) * terms.score
        score *= trust(card.provenance) * preference(card, by_id)
        hits.append(
            FactHit(
                fact=to_public(card),
                score=round(score, 6),
                keyword_rank=_rank(ranks["keyword"], cid),
                vector_rank=_rank(ranks["vector"], cid),
                conflicts_with=conflicts_of(card),
            )
        )
    hits.sort(key=lambda h: -h.score)
    return hits[:top_k]


def _rank(found: dict[uuid.UUID, tuple[int, float]], cid: uuid.UUID) -> int | None:
    return found[cid][0] if cid in found else None
