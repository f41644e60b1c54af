"""Top k walking the index's lists lazily: each list's cards kept in order of their score bound
in the current epoch (serve/topk.py), the lists merged best bound first, so a query checks the
cards that can rank and never reads the rest of its candidates.

A card used or given feedback since its list was ordered (`touched`) may now bound higher than
its place says: such cards wait in `Snapshot.touched`, are added to each query they are a
candidate of, and every FOLD of them are moved to their new places. The result is exactly
topk.top_matches' (the exhaustive ranking); when no card of the most evidence holds, the
support term needs every candidate, and the walk hands over to top_matches.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from itertools import chain
from typing import TYPE_CHECKING, Any

from memory_core.keywords import term_set
from memory_core.serve.groups import covers, groups, homes
from memory_core.serve.resort import STEP, resort_step
from memory_core.serve.snapshot import support_of
from memory_core.serve.topk import (
    SLACK,
    UNBOUNDED,
    Bounds,
    TopQuery,
    base_bound,
    epoch,
    loosens,
    top_matches,
)

if TYPE_CHECKING:
    from memory_core.serve.retrieval import Ranked
    from memory_core.serve.snapshot import Entry, Snapshot

FOLD = 64  # touched cards moved to their places at once
TRUST_MAX = 1.0  # trust is a weight in 0..1 (memory_core.screen.provenance)
# cards and their negated keys, ascending; the most support of each kind among them
Order = tuple[list["Entry"], list[float], dict[str, int]]


def _bound(e: Entry, b: Bounds, sup: float, spec: Callable[[int], float]) -> tuple[Any, ...]:
    bound = e.bound
    if bound[0] is not b:
        parts = (e.confidence, e.seen_at, e.use_count)
        bound = (b, base_bound(e, b, spec), sup * max(e.trust, 0.0))
        e.bound = bound
        if (e.confidence, e.seen_at, e.use_count) != parts:  # changed meanwhile
            e.bound = (None, 0.0, 0.0)
            return (b, UNBOUNDED, bound[2])
    return bound


def _order(
    snap: Snapshot, name: Any, cards: list[Entry], b: Bounds, spec: Any, budget: list[int]
) -> Order:
    """The list's cards by bound (standing plus support), highest first, cached per epoch;
    a list replaced by a few cards changed is patched, not sorted again; after an epoch that
    only tightens the bounds, the old order is walked while the new one is made in steps
    (serve/resort.py)."""
    cached = snap.orders.get(name)
    if cached is not None and (cached[1] is b or loosens(cached[1], b)):
        order: Order | None = (cached[2], cached[3], cached[4])
        if cached[0] is not cards and (order := _patch(cached, cards, b, spec)) is not None:
            snap.orders[name] = cached = (cards, cached[1], *order)
        if order is not None:
            if cached[1] is b:
                return order
            sup = b.weights.support
            made = resort_step(snap, name, cards, b, budget, lambda e: _bound(e, b, sup, spec))
            if made is None:
                return order  # valid, looser: its keys still bound every card's score
            order = (made[0], made[1], _most(made[0], b.weights.support_counts))
            snap.orders[name] = (cards, b, *order)
            return order
    w = b.weights
    pairs: list[tuple[float, Entry]] = []
    for e in cards:
        bound = _bound(e, b, w.support, spec)
        e.sortkey = bound[1] + bound[2]
        pairs.append((-e.sortkey, e))
    pairs.sort(key=lambda p: p[0])
    entries = [e for _, e in pairs]
    order = (entries, [k for k, _ in pairs], _most(entries, w.support_counts))
    if name is not None:
        snap.orders[name] = (cards, b, *order)
    return order


def _most(entries: list[Entry], counts: str) -> dict[str, int]:
    most: dict[str, int] = {}
    for e in entries:
        if not e.broken:
            most[e.kind] = max(most.get(e.kind, 0), support_of(e, counts))
    return most


PATCH = 16  # a list with more cards changed than this is sorted again


def _patch(cached: tuple[Any, ...], cards: list[Entry], b: Bounds, spec: Any) -> Order | None:
    # the differences by identity at C speed: the lists run to thousands of cards, and a
    # fold patches every list a changed card left (a loop over each was most of a slow query)
    old = dict(zip(map(id, cached[2]), cached[2], strict=True))
    new = dict(zip(map(id, cards), cards, strict=True))
    gone, added = old.keys() - new.keys(), new.keys() - old.keys()
    if len(gone) + len(added) > PATCH:
        return None
    entries, keys = list(cached[2]), list(cached[3])
    counts = b.weights.support_counts
    most = dict(cached[4])
    lost: set[str] = set()  # kinds whose most-supported card left: recounted unless matched
    for i in gone:
        e = old[i]
        if (at := _find(entries, keys, e)) >= 0:
            del entries[at], keys[at]
        if not e.broken and support_of(e, counts) >= most.get(e.kind, 0):
            lost.add(e.kind)
    came: dict[str, int] = {}
    for i in added:
        e = new[i]
        bound = _bound(e, b, b.weights.support, spec)
        e.sortkey = bound[1] + bound[2]
        at = bisect_right(keys, -e.sortkey)
        entries.insert(at, e)
        keys.insert(at, -e.sortkey)
        if not e.broken:
            came[e.kind] = max(came.get(e.kind, 0), support_of(e, counts))
    # a card replaced by its own new version usually brings the same support back
    if any(came.get(k, -1) < most.get(k, 0) for k in lost):
        return entries, keys, _most(entries, counts)
    for k, n in came.items():
        most[k] = max(most.get(k, 0), n) if k not in lost else n
    return entries, keys, most


def _find(entries: list[Entry], keys: list[float], e: Entry) -> int:
    """Where the card is in an ordered list (-1: not there)."""
    old = -e.sortkey
    at = bisect_left(keys, old)
    while at < len(keys) and keys[at] == old and entries[at] is not e:
        at += 1
    if at < len(keys) and entries[at] is e:
        return at
    # ordered under another key (its other list was ordered after a change)
    return next((i for i, x in enumerate(entries) if x is e), -1)


def fold(snap: Snapshot, b: Bounds, sup: float, spec: Any) -> None:
    """Move the touched cards to their places in the ordered lists, each list copied once
    (hold snap.order_lock). A list ordered in an earlier epoch that b loosens keeps its epoch:
    it is still ordered anew in steps (serve/resort.py)."""
    n = len(snap.touched)
    moves: dict[Any, tuple[list[Entry], list[tuple[Entry, float]]]] = {}
    placed: list[tuple[Entry, float]] = []
    for e in {id(e): e for e in snap.touched[:n]}.values():
        bound = _bound(e, b, sup, spec)
        new = -(bound[1] + bound[2])
        placed.append((e, new))
        for name, cards in homes(snap.index, e):
            moves.setdefault(name, (cards, []))[1].append((e, new))
    for name, (cards, moved) in moves.items():
        cached = snap.orders.get(name)
        if cached is None or (cached[1] is not b and not loosens(cached[1], b)):
            continue  # no order, or one of an epoch it does not bound: sorted anew
        if cached[0] is cards:
            entries, keys, most = list(cached[2]), list(cached[3]), cached[4]
        elif (patched := _patch(cached, cards, b, spec)) is not None:
            entries, keys, most = patched  # the list changed since: brought up to date first
        else:
            snap.orders.pop(name, None)
            continue
        found = []
        for e, new in moved:  # found by the key it was placed at (e.sortkey, not yet moved)
            if (at := _find(entries, keys, e)) >= 0:  # not there: replaced or removed since
                del entries[at], keys[at]
                found.append((e, new))
        for e, new in found:
            to = bisect_right(keys, new)
            entries.insert(to, e)
            keys.insert(to, new)
        snap.orders[name] = (cards, cached[1], entries, keys, most)
    for e, new in placed:
        e.sortkey = -new
    del snap.touched[:n]


def lazy_top(
    snap: Snapshot,
    state: Mapping[str, Any],
    *,
    q: TopQuery,
) -> tuple[list[Ranked], int]:
    """(the best matches, unsorted, with support, among the cards the index gives the state;
    how many candidates the index gave)."""
    kinds, w, query, top_k, holds, score, specificity, tie = (
        q.kinds, q.w, q.query, q.top_k, q.holds, q.score, q.specificity, q.tie
    )  # fmt: skip
    b = epoch(snap, w, q.now)
    wt, sup, size, unit = w.text_similarity, w.support, len(query) if query else 0, w.support_counts
    lists = groups(snap.index, state)
    if snap.index.spread:  # a card filed under `a == 1 || b == 2` may be in two lists
        count = len(set(map(id, chain.from_iterable(cards for _, cards in lists))))
    else:
        count = sum(len(cards) for _, cards in lists)
    # query threads share the orders: each read-modify-write of them (a fold, a patch, a new
    # epoch) under one lock, or one thread's write undoes another's move and a touched card
    # waits in its old place, out of the walk's reach, until the epoch ends. The orders read
    # are never changed in place afterwards (copy on write), so the walk needs no lock.
    with snap.order_lock:
        if snap.orders_epoch is not b:
            if snap.orders_epoch is None or not loosens(snap.orders_epoch, b):
                snap.orders = {}  # the old keys may not bound the new scores
            snap.orders_epoch, snap.resorts = b, {}
        if len(snap.touched) >= FOLD:
            fold(snap, b, sup, specificity)
        budget = [STEP]
        orders = [_order(snap, name, cards, b, specificity, budget) for name, cards in lists]
    late = [
        e
        for e in {id(e): e for e in list(snap.touched)}.values()
        if snap.entries.get(e.card_id) is e and covers(snap.index, e, state)
    ]
    seen: dict[int, bool] = {}

    def ok(e: Entry) -> bool:
        return not e.broken and e.kind in kinds

    def check(e: Entry) -> bool:
        if (held := seen.get(id(e))) is None:
            held = seen[id(e)] = holds(e)
        return held

    top = 1
    if sup:  # the most evidence among the candidates: one of them usually holds
        most = max(
            [m.get(k, 0) for _, _, m in orders for k in kinds]
            + [support_of(e, unit) for e in late if ok(e)],
            default=0,
        )
        firsts = (e for cards, _, _ in orders for e in cards)
        if not any(check(e) for e in chain(late, firsts) if ok(e) and support_of(e, unit) == most):
            flat = list({id(e): e for _, cards in lists for e in cards}.values())
            found, _ = top_matches(flat, snapshot=snap, q=q)
            return found, count
        top = most or 1
    lift = wt * (1 + sup * TRUST_MAX)  # what text and support can add to a head's key

    def head(j: int, at: int) -> tuple[float, int, int]:
        key = -orders[j][1][at]
        return (-((1 - wt) * key + lift if query is not None else key), j, at)

    heap: list[tuple[float, int, int]] = [
        head(j, 0) for j, (cards, _, _) in enumerate(orders) if cards
    ]
    exact: list[Entry] = []  # cards with their own bound in the heap (j == -1: exact[at])
    done: set[int] = set()

    def push_exact(e: Entry) -> None:
        bound = _bound(e, b, sup, specificity)
        x = bound[1]
        if query is not None:
            sim = 1.0 if e.words is None else len(query & e.words) / size if query else 0.0
            x = (1 - wt) * x + wt * sim
        exact.append(e)
        heapq.heappush(heap, (-(x + bound[2]), -1, len(exact) - 1))

    for e in late:
        if ok(e) and id(e) not in done:
            done.add(id(e))
            push_exact(e)
    heapq.heapify(heap)
    matches: list[Ranked] = []
    kth: list[int] = []
    while heap:
        neg, j, at = heapq.heappop(heap)
        if len(kth) >= top_k and round((SLACK - neg) / tie) < kth[0]:
            break
        if j >= 0:  # a list's next card: its own bound goes in
            cards = orders[j][0]
            if at + 1 < len(cards):
                heapq.heappush(heap, head(j, at + 1))
            e = cards[at]
            if ok(e) and id(e) not in done:
                done.add(id(e))
                push_exact(e)
            continue
        e = exact[at]
        if query is not None and e.words is None:  # split now, back in at its exact bound
            e.words = term_set(e.text)
            push_exact(e)
            continue
        if not check(e):
            continue
        m = score(e)
        if sup:
            m.score.support = support_of(m.entry, unit) / top
            m.score.score += sup * m.score.support * m.entry.trust
        matches.append(m)
        step = round(m.score.score / tie)
        if len(kth) < top_k:
            heapq.heappush(kth, step)
        elif step > kth[0]:
            heapq.heapreplace(kth, step)
    return matches, count
