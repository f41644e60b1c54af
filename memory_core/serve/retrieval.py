"""Retrieval: filter by preconditions on the task state, rank and explain.

The filter evaluates only the cards filed under a need the state satisfies (the snapshot's
index); `explain` evaluates those with every check's verdict, plus a bounded sample of the
cards filed under the state's variables whatever their values, where the near misses (one
condition away) come from: an explanation costs a few queries, not a scan of every card.

Layer: retrieval.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_core.cards.score import ranking_terms
from memory_core.keywords import term_set, term_tuple
from memory_core.preconditions import (
    Check,
    CompiledPrecondition,
    Verdict,
    check,
    make_context,
    normalise_value,
)
from memory_core.serve.entry import Entry, support_of
from memory_core.serve.groups import groups
from memory_core.serve.near_misses import closest, first_failing, held_count
from memory_core.serve.ordered import lazy_top
from memory_core.serve.profiles import demote
from memory_core.serve.profiles import warning_scope as warning_scope
from memory_core.serve.schemas import PreconditionCheck, Score
from memory_core.serve.snapshot import Snapshot
from memory_core.serve.topk import Ranked as Ranked
from memory_core.serve.topk import TopQuery, usable
from memory_core.serve.topk import specificity as specificity
from memory_core.settings import RankingWeights

NEAR_MISS_SAMPLE = 128  # near-miss cards explain evaluates, at most
# candidates checked best bound first, stopping once none can enter the top k
# (memory_core.serve.ordered); bounded_from=EXHAUSTIVE scores every match instead
BOUNDED_FROM = 0
EXHAUSTIVE = 10**9


@dataclass
class Retrieval:
    """Matches best first; with explain, the closest misses and what was evaluated."""

    matches: list[Ranked]
    counted: int | Callable[[], int]  # the candidates, or how to count them when asked
    active_cards: int
    near_misses: list[Ranked] = field(default_factory=list)
    # the tool's reminders served after the others, and why (serve.profiles)
    demoted: dict[uuid.UUID, str] = field(default_factory=dict)

    @property
    def candidates(self) -> int:
        """How many cards the index gave the state (counted on first read)."""
        if callable(self.counted):
            self.counted = self.counted()
        return self.counted


TIE = 1e-3  # score resolution of the ranking: recency moves this much in about three hours


def score_entry(
    e: Entry, *, now: datetime, max_uses: int, w: RankingWeights, query: frozenset[str] | None
) -> Score:
    """score = (w_c*confidence + w_r*recency + w_u*use_frequency + w_s*specificity) * trust,
    blended with text similarity."""
    recency, frequency, spec, similarity, score = _score_terms(
        e, now=now, max_uses=max_uses, w=w, query=query
    )
    # built unvalidated: every field is a float computed here, and validation cost more than
    # the ranking itself when a query matched a hundred cards (Score.of)
    return Score.of(e.confidence, recency, frequency, spec, similarity, score)


def _score_terms(
    e: Entry, *, now: datetime, max_uses: int, w: RankingWeights, query: frozenset[str] | None
) -> tuple[float, float, float, float | None, float]:
    """(recency, use frequency, specificity, text similarity, score) of `score_entry`."""
    terms = ranking_terms(
        confidence=e.confidence,
        seen_at=e.seen_at,
        use_count=e.use_count,
        now=now,
        max_uses=max_uses,
        w=w,
    )
    spec = specificity(len(e.compiled))
    # an operator's or the agent's own lesson outranks an LLM's inference of equal standing
    base = (terms.score + w.specificity * spec) * e.trust
    if query is None:
        return terms.recency, terms.use_frequency, spec, None, base
    if e.words is None:  # the card's terms, split once per snapshot
        e.words = term_tuple(e.text)
    sim = len(query.intersection(e.words)) / len(query) if query else 0.0
    blended = (1 - w.text_similarity) * base + w.text_similarity * sim
    return terms.recency, terms.use_frequency, spec, sim, blended


def holds(compiled: Sequence[CompiledPrecondition], context: Any, keys: frozenset[str]) -> bool:
    """Every precondition holds (as `check` says `held` for each), without building a Check
    per condition: the wrapper cost several times the CEL evaluation on the hot path."""
    for c in compiled:
        if not c.variables <= keys:
            return False
        try:
            if c.program.execute(context) is not True:
                return False
        except (RuntimeError, KeyError, TypeError):
            return False
    return True


def retrieve(
    *,
    snapshot: Snapshot,
    state: Mapping[str, Any],
    now: datetime,
    top_k: int = 5,
    weights: RankingWeights | None = None,
    query: str | None = None,
    explain: bool = False,
    near_misses: int = 10,
    kinds: Sequence[str] = ("experience",),
    bounded_from: int = BOUNDED_FROM,
) -> Retrieval:
    """Cards of the snapshot whose preconditions all hold on the state, best first."""
    w = weights or RankingWeights()
    norm = {str(k): normalise_value(v) for k, v in state.items()}
    context = make_context(norm, normalised=True)
    keys = frozenset(norm)
    qwords = term_set(query) if query and query.strip() else None
    matches: list[Ranked] = []
    failed: list[Entry] = []  # candidates that do not hold: the first near misses
    if top_k > 0 and usable(w) and bounded_from < EXHAUSTIVE:
        q = TopQuery(
            kinds=kinds,
            now=now,
            w=w,
            query=qwords,
            top_k=top_k,
            holds=lambda e: holds(e.compiled, context, keys),
            score=lambda e: Ranked(
                e, score_entry(e, now=now, max_uses=snapshot.max_uses, w=w, query=qwords)
            ),
            specificity=specificity,
            tie=TIE,
        )
        matches, count = lazy_top(snapshot, norm, q=q)
        _order(matches, w.support_counts)
        demoted = demote(matches, top_k, snapshot.profiles, context, keys)
        if not explain:
            return Retrieval(matches[:top_k], count, len(snapshot.entries), demoted=demoted)
        # explained: the same top k, and the first candidates that fail as near misses
        counted: int | Callable[[], int] = count
        failed, found = first_failing(
            groups(snapshot.index, norm),
            holds=lambda e: holds(e.compiled, context, keys),
            skip={id(m.entry) for m in matches},
            kinds=kinds,
            limit=NEAR_MISS_SAMPLE,
        )
        if found is not None:  # the walk saw every candidate: counted without a second set
            counted = len(found)
    else:
        candidates = snapshot.candidates(norm)
        counted, found = len(candidates), None
        for e in candidates:  # no card twice (the index says so)
            if e.broken or e.kind not in kinds:
                continue
            if holds(e.compiled, context, keys):
                matches.append(
                    Ranked(
                        e, score_entry(e, now=now, max_uses=snapshot.max_uses, w=w, query=qwords)
                    )
                )
            elif explain and len(failed) < NEAR_MISS_SAMPLE:
                failed.append(e)
        if w.support and matches:  # relative to this state's matches: known once all are
            top = max(support_of(m.entry, w.support_counts) for m in matches) or 1
            for m in matches:
                m.score.support = support_of(m.entry, w.support_counts) / top
                m.score.score += w.support * m.score.support * m.entry.trust
        _order(matches, w.support_counts)
        demoted = demote(matches, top_k, snapshot.profiles, context, keys)
    misses: list[tuple[int, Ranked]] = []
    if explain:
        for m in matches[:top_k]:  # the verdicts of what is served
            m.checks = [check(c, context, keys) for c in m.entry.compiled]
        pool = failed
        if len(pool) < NEAR_MISS_SAMPLE:  # the sample beyond the candidates, none twice
            if found is None:
                found = {id(e) for e in candidates}
            sample = snapshot.index.sample(norm, limit=2 * NEAR_MISS_SAMPLE)
            others = [e for e in sample if id(e) not in found and not e.broken and e.kind in kinds]
            pool = (failed + others)[:NEAR_MISS_SAMPLE]
        # the most conditions held, then the best score: only the kept few get Checks
        for e in closest(
            pool,
            held=lambda e: held_count(e.compiled, context, keys),
            score=lambda e: _score_terms(e, now=now, max_uses=snapshot.max_uses, w=w, query=qwords)[
                4
            ],
            n=near_misses,
        ):
            cs = [check(c, context, keys) for c in e.compiled]
            score = score_entry(e, now=now, max_uses=snapshot.max_uses, w=w, query=qwords)
            misses.append((sum(c.verdict is Verdict.held for c in cs), Ranked(e, score, cs)))
    misses.sort(key=lambda hm: (-hm[0], -hm[1].score.score, hm[1].entry.card_id))
    return Retrieval(
        matches=matches[:top_k],
        counted=counted,
        active_cards=len(snapshot.entries),
        near_misses=[m for _, m in misses[:near_misses]],
        demoted=demoted,
    )


def _order(matches: list[Ranked], counts: str) -> None:
    """Best first; scores within TIE tie (a card written minutes later is no better a lesson):
    more support, evidence rows and runs first, then by content, never by the random id."""
    matches.sort(
        key=lambda m: (
            -round(m.score.score / TIE),
            -support_of(m.entry, counts),
            -m.entry.evidence_count,
            -m.entry.run_count,
            m.entry.text,
            # a UUID orders as its canonical text does (fixed-width lower-case hex), unformatted
            m.entry.card_id,
        )
    )


def public_checks(checks: Sequence[Check]) -> list[PreconditionCheck]:
    """Checks as the API shows them."""
    return [
        PreconditionCheck(
            expression=c.expression,
            verdict=c.verdict.value,
            missing=list(c.missing),
            detail=c.detail,
        )
        for c in checks
    ]
