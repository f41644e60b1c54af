"""Top k without scoring every match: candidates in order of the highest score they can have.

A card's score is its standing (confidence, recency, uses, specificity, times trust), blended
with text similarity, plus its support (evidence against the best-supported match, at most 1).
Each part only falls as time passes and as the namespace's most used card gains uses, so the
score a card would have at the start of an epoch (`Bounds`), with full support, bounds its
score at any later query. Candidates are checked from the highest bound down, and the check
stops once a bound falls a whole tie step (retrieval.TIE) below the k-th best match found: no
card left can enter the top k, nor tie with it. The result is exactly the exhaustive ranking.

The support term divides by the most evidence among all matches, so that is found first: the
candidates with the most evidence are checked until one holds.

Layer: walk.
"""

from __future__ import annotations

import heapq
import math
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import count
from typing import Any, Protocol

from memory_core.keywords import term_tuple
from memory_core.preconditions import Check
from memory_core.serve.entry import Entry, support_of
from memory_core.serve.index import CardIndex
from memory_core.serve.schemas import Score
from memory_core.settings import RankingWeights

REUSE = 1.25  # bounds assuming a most-used count this much below the snapshot's are renewed
EPOCH = timedelta(hours=1)  # bounds computed this long ago are recomputed (recency decays)
# the uses a recently used card's bound assumes beyond its count, as a share of the most
# uses: its next uses leave its places valid (entry.used), for keys this much looser
HEADROOM = 0.02
UNBOUNDED = 1e9  # a bound no score reaches (finite: it is rounded to tie steps)
SLACK = 1e-9  # above every bound: float rounding of pow and sums never crosses it


@dataclass(frozen=True, eq=False)
class Bounds:
    """An epoch of score bounds: the weights, start time and most uses they assume."""

    weights: RankingWeights
    at: datetime
    max_uses: int
    # what a card's bound names its epoch by: an int, not the Bounds, so the bound is a tuple
    # of atoms that the collector stops tracking (100k tracked bounds made a full collection
    # ~100 ms, a query's worst case)
    serial: int = field(default_factory=count().__next__)


class Walked(Protocol):
    """What the ordered walk reads and keeps in a snapshot (serve/snapshot.py holds it): the
    cards and their index, the epoch of their bounds, the lists ordered in it and the cards
    changed in place since."""

    namespace: str
    entries: dict[uuid.UUID, Entry]
    index: CardIndex
    max_uses: int
    bounds: Bounds | None
    orders: dict[Any, Any]
    orders_epoch: Bounds | None
    resorts: dict[Any, Any]
    touched: list[Entry]
    order_lock: threading.Lock
    warming: str | None
    unplaced: set[Any]


@dataclass
class Ranked:
    """A card that applies, its score, and (explain) its checks."""

    entry: Entry
    score: Score
    checks: list[Check] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TopQuery:
    """What a top-k walk ranks by: the kinds served, the time and weights, the query's words,
    k, and how a candidate is checked, scored and its specificity and tie step weighed."""

    kinds: Sequence[str]
    now: datetime
    w: RankingWeights
    query: frozenset[str] | None
    top_k: int
    holds: Callable[[Entry], bool]
    score: Callable[[Entry], Ranked]
    specificity: Callable[[int], float]
    tie: float


def specificity(conditions: int) -> float:
    """0 for a card on one condition (the tool alone), towards 1 the more conditions of the
    state it was learned on it tests: a lesson about calls like this one tells more."""
    return (conditions - 1) / conditions if conditions > 1 else 0.0


def usable(w: RankingWeights) -> bool:
    """Every weight non-negative: the score then grows with each of its parts."""
    return min(w.confidence, w.recency, w.use_frequency, w.specificity, w.support) >= 0


def epoch(snapshot: Walked, w: RankingWeights, now: datetime) -> Bounds:
    """The snapshot's current epoch, a new one when the weights, time or uses moved it."""
    b: Bounds | None = snapshot.bounds
    if (
        b is None
        or (b.weights is not w and b.weights != w)
        or now < b.at
        or now - b.at > EPOCH
        or snapshot.max_uses < b.max_uses
        # uses against a most-used count since grown: every bound too loose to stop early
        or snapshot.max_uses > b.max_uses * REUSE + 1
    ):
        b = Bounds(w, now, snapshot.max_uses)
        snapshot.bounds = b
    return b


def loosens(old: Bounds, new: Bounds) -> bool:
    """old's bounds still bound every score of new's epoch: the same weights, an earlier start
    (recency only decays) and no more uses assumed (a use share only falls as the most-used
    card gains uses). Such an epoch was renewed to tighten the bounds, not to correct them."""
    return (
        (old.weights is new.weights or old.weights == new.weights)
        and old.at <= new.at
        and old.max_uses <= new.max_uses
    )


ORDER_REUSE = 2.0  # a list's order is made anew once the most uses grew this much since
ORDER_AGE = timedelta(minutes=10)  # or once its epoch began this long before the current one


def close_enough(old: Bounds, new: Bounds) -> bool:
    """old's order of a list may stand for new's epoch without being made again: new only
    tightens its bounds (loosens), and by little: a renewal for a few more uses of the most
    used card (REUSE), minutes apart. Ordering every list the queries reach again at each
    such renewal was a third of the CPU of a new namespace's queries, whose use counts are
    small and grow by a quarter every few queries; the walk pays for the looser keys instead
    (at most use_frequency * (1 - 1/ORDER_REUSE) of a heavily used card's score)."""
    return (
        loosens(old, new)
        and new.at - old.at <= ORDER_AGE
        and new.max_uses <= old.max_uses * ORDER_REUSE + 1
    )


def support_bound(sup: float, trust: float) -> float:
    """The most the support term can add to a card of this trust: sup itself (one float
    shared by every card of full trust, not one each: 24 MB at a million cards)."""
    return sup if trust == 1.0 else sup * max(trust, 0.0)


def assumed_uses(e: Entry, b: Bounds) -> int:
    """The use count a bound made now assumes: a few more than the card has (HEADROOM of the
    most uses) when its recency is already at its highest for the epoch, as a use leaves it
    there and only raises the count; else its count (a use would raise its recency too)."""
    if e.seen_at >= b.at:
        return e.use_count + max(1, int(b.max_uses * HEADROOM))
    return e.use_count


def base_bound(e: Entry, b: Bounds, specificity: Callable[[int], float]) -> float:
    """The card's highest standing (times trust) at any time after b.at while it has at most
    assumed_uses: retrieval's formula (cards/score.py) at b.at, those uses against no more uses
    than they are or b assumed; inlined, as the first query of an epoch computes it for each of
    its candidates. The card's key_uses is brought down to what this bound assumes."""
    w = b.weights
    age_days = max((b.at - e.seen_at).total_seconds(), 0.0) / 86400
    rec = math.pow(0.5, age_days / w.recency_half_life_days)
    uses = assumed_uses(e, b)
    if uses < e.key_uses:
        e.key_uses = uses
    most = max(b.max_uses, uses)
    freq = uses / most if most else 0.0
    score = w.confidence * e.confidence + w.recency * rec + w.use_frequency * freq
    return (score + w.specificity * specificity(len(e.compiled))) * max(e.trust, 0.0)


def top_matches(
    candidates: Sequence[Entry], *, snapshot: Walked, q: TopQuery
) -> tuple[list[Ranked], int]:
    """(the best servable matches among the candidates as retrieval scores them, unsorted,
    with support; how many were checked): every match that can rank in the top k, and maybe
    others. One pass over the candidates, then checks from the highest bound down."""
    kinds, w, query, top_k, holds, score, specificity, tie = (
        q.kinds, q.w, q.query, q.top_k, q.holds, q.score, q.specificity, q.tie
    )  # fmt: skip
    b = epoch(snapshot, w, q.now)
    wt, sup, size = w.text_similarity, w.support, len(query) if query else 0
    unit = w.support_counts
    pool: list[Entry] = []
    bases: list[tuple[int | None, float, float]] = []  # each card's bound, as read once here
    bounds: list[float] = []
    for e in candidates:
        if e.broken or e.kind not in kinds:
            continue
        bound = e.bound
        if bound[0] != b.serial:
            parts = (e.confidence, e.seen_at, e.use_count)
            most = support_bound(sup, e.trust)  # support is at most 1
            e.bound = bound = (b.serial, base_bound(e, b, specificity), most)
            # a use or feedback changing the card meanwhile (`touched` may have run before
            # the line above): no bound this time, computed again next time
            if (e.confidence, e.seen_at, e.use_count) != parts:
                e.bound, bound = (None, 0.0, 0.0), (b.serial, UNBOUNDED, most)
        x = bound[1]
        if query is not None:  # a card's words not split yet: its similarity is at most 1
            words = e.words
            sim = 1.0 if words is None else len(query.intersection(words)) / (size or 1)
            x = (1 - wt) * x + wt * sim
        x += bound[2]
        pool.append(e)
        bases.append(bound)
        bounds.append(x)
    seen: dict[int, bool] = {}

    def check(i: int) -> bool:
        if (held := seen.get(i)) is None:
            held = seen[i] = holds(pool[i])
        return held

    top = 1
    if sup:  # the most evidence among the matches: what support is relative to
        most = max((support_of(e, unit) for e in pool), default=0)
        # usually a card of the most evidence holds, and soon
        levels = (
            [most]
            if any(check(i) for i, e in enumerate(pool) if support_of(e, unit) == most)
            else sorted({support_of(e, unit) for e in pool}, reverse=True)
        )
        for level in levels:
            if any(check(i) for i, e in enumerate(pool) if support_of(e, unit) == level):
                top = level or 1
                break
        else:
            return [], len(seen)
    # highest bound first; a card whose words are not split yet is split when it comes up
    # (as retrieval would, once per snapshot) and goes back in at its exact bound
    heap = [(-x, i) for i, x in enumerate(bounds)]
    heapq.heapify(heap)
    matches: list[Ranked] = []
    kth: list[int] = []  # the k best matches' scores in tie steps (a min-heap)
    while heap:
        neg, i = heapq.heappop(heap)
        if len(kth) >= top_k and round((SLACK - neg) / tie) < kth[0]:
            break
        if query is not None and (e := pool[i]).words is None:
            e.words = term_tuple(e.text)
            sim = len(query.intersection(e.words)) / size if query else 0.0
            x = (1 - wt) * bases[i][1] + wt * sim
            x += bases[i][2]
            heapq.heappush(heap, (-x, i))
            continue
        if not check(i):
            continue
        m = score(pool[i])
        if sup:
            m.score.support = support_of(m.entry, unit) / top
            m.score.score += sup * m.score.support * m.entry.trust
        matches.append(m)
        step = round(m.score.score / tie)
        if len(kth) < top_k:
            heapq.heappush(kth, step)
        elif step > kth[0]:
            heapq.heapreplace(kth, step)
    return matches, len(seen)
