"""Top k walking the index's lists lazily: each list's cards kept in order of their score bound
in the current epoch (serve/topk.py), the lists merged best bound first, so a query checks the
cards that can rank and never reads the rest of its candidates.

A card used or given feedback since its list was ordered (`touched`) may now bound higher than
its place says: such cards wait in `Snapshot.touched`, are added to each query they are a
candidate of, and every FOLD of them are moved to their new places. A use alone moves a card
only once its count passes what its keys assume (entry.used; topk.HEADROOM): at 100k cards and
five uses a query, 1 card moved a query instead of 5. The result is exactly
topk.top_matches' (the exhaustive ranking); when no card of the most evidence holds, the
support term needs every candidate, and the walk hands over to top_matches.

Layer: walk.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from functools import partial
from heapq import heappop, heappush
from itertools import chain
from typing import Any

from memory_core.keywords import term_tuple
from memory_core.serve.entry import Entry, support_of
from memory_core.serve.groups import Group, covers, groups
from memory_core.serve.index import CardIndex
from memory_core.serve.list_orders import Keys, fold, order_of
from memory_core.serve.list_orders import bound_of as _bound
from memory_core.serve.resort import STEP
from memory_core.serve.topk import (
    SLACK,
    Ranked,
    TopQuery,
    Walked,
    epoch,
    loosens,
    top_matches,
)
from memory_core.serve.warm import start_warming

# touched cards moved to their places by each query: a few, so no query pays for many (64 at
# once was 4-12 ms, a query in 15 at 100k cards under feedback, most of the p99); more when
# over FOLD wait, as each query also checks every waiting card
FOLD_STEP = 8
FOLD = 64
# a free-text query reads a list's cards' words a slice at a time, each slice twice the last:
# the few cards whose similarity can rank are then walked, not every card whose standing
# alone could (half of a list: ~1,000 cards and 5-10 ms a query at 100k cards)
CHUNK = 32
CHUNK_MAX = 512
TRUST_MAX = 1.0  # trust is a weight in 0..1 (memory_core.screen.provenance)


def candidate_count(index: CardIndex, lists: list[Group]) -> int:
    """How many cards these lists hold (a card filed under `a == 1 || b == 2` may be in two:
    counted once)."""
    if index.spread:
        return len(set(map(id, chain.from_iterable(cards for _, cards in lists))))
    return sum(len(cards) for _, cards in lists)


def lazy_top(
    snap: Walked,
    state: Mapping[str, Any],
    *,
    q: TopQuery,
) -> tuple[list[Ranked], Callable[[], int]]:
    """(the best matches, unsorted, with support, among the cards the index gives the state;
    how many candidates the index gave, counted when asked: a set of thousands of ids was a
    third of a plain query at 100k cards)."""
    kinds, w, query, top_k, holds, score, specificity, tie = (
        q.kinds, q.w, q.query, q.top_k, q.holds, q.score, q.specificity, q.tie
    )  # fmt: skip
    b = epoch(snap, w, q.now)
    wt, sup, size, unit = w.text_similarity, w.support, len(query) if query else 0, w.support_counts
    lists = groups(snap.index, state)
    count = partial(candidate_count, snap.index, lists)
    # query threads share the orders: each read-modify-write of them (a fold, a patch, a new
    # epoch) under one lock, or one thread's write undoes another's move and a touched card
    # waits in its old place, out of the walk's reach, until the epoch ends. The orders read
    # are never changed in place afterwards (copy on write), so the walk needs no lock.
    with snap.order_lock:
        if snap.orders_epoch is not b:
            if snap.orders_epoch is None or not loosens(snap.orders_epoch, b):
                snap.orders = {}  # the old keys may not bound the new scores
            elif snap.warming == "done":
                # a big snapshot's lists are ordered anew in the background (serve/warm.py);
                # queries walk the old orders meanwhile (valid, looser) instead of resorting
                snap.warming = "renewed"
            snap.orders_epoch, snap.resorts = b, {}
        if snap.touched:
            fold(snap, b, sup, specificity, max(FOLD_STEP, len(snap.touched) - FOLD))
        budget = [STEP]
        orders = [order_of(snap, name, cards, b, specificity, budget) for name, cards in lists]
    if snap.warming in (None, "renewed"):  # the first walk, or a new epoch: ordered meanwhile
        start_warming(snap, b, specificity)
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
    blend, serial = 1 - wt, b.serial
    text = query is not None
    qwords = query if query is not None else frozenset()
    # the sequences walked (j >= 0: seqs[j]), each by its negated bounds ascending: the lists'
    # orders; with free text, slices of them reordered by what their cards can score with
    # their similarity known (by_similarity), the rest of list i in the heap as j == -2 - i
    seqs: list[tuple[list[Entry], Any]] = [(cards, keys) for cards, keys, _ in orders]
    heap: list[tuple[float, int, int]] = [
        (-(blend * -keys[0] + lift), -2 - j, 0) if text else (keys[0], j, 0)
        for j, (cards, keys, _) in enumerate(orders)
        if cards
    ]
    chunk = [CHUNK] * len(orders)
    exact: list[Entry] = []  # cards with their own bound in the heap (j == -1: exact[at])
    done: set[int] = set()

    def push_exact(e: Entry) -> None:
        # inlined in the walk below, which runs it for hundreds of cards per free-text query
        bound = e.bound
        if bound[0] != serial:
            bound = _bound(e, b, sup, specificity)
        x = bound[1]
        if text:
            words = e.words
            x = blend * x + wt * (
                1.0 if words is None else len(qwords.intersection(words)) / (size or 1)
            )
        exact.append(e)
        heappush(heap, (-(x + bound[2]), -1, len(exact) - 1))

    for e in late:
        if ok(e) and id(e) not in done:
            done.add(id(e))
            push_exact(e)
    heapq.heapify(heap)
    matches: list[Ranked] = []
    kth: list[int] = []
    floor: int | None = None  # the k-th best score step once k matches are found
    while heap:
        neg, j, at = heappop(heap)
        if floor is not None and round((SLACK - neg) / tie) < floor:
            break
        if j <= -2:  # the rest of a list, read under free text: its next slice reordered
            i = -2 - j
            cards, keys, _ = orders[i]
            end = min(at + chunk[i], len(cards))
            chunk[i] = min(2 * chunk[i], CHUNK_MAX)
            if end < len(cards):
                heappush(heap, (-(blend * -keys[end] + lift), j, end))
            seqs.append(by_similarity(cards[at:end], keys[at:end], qwords, blend, wt, lift - wt))
            heappush(heap, (seqs[-1][1][0], len(seqs) - 1, 0))
            continue
        if j >= 0:  # a sequence's next card: its own bound goes in, the card after it heads
            cards, keys = seqs[j]
            if at + 1 < len(cards):
                heappush(heap, (keys[at + 1], j, at + 1))
            e = cards[at]
            if e.broken or e.kind not in kinds or id(e) in done:
                continue
            done.add(id(e))
            bound = e.bound
            if bound[0] != serial:
                bound = _bound(e, b, sup, specificity)
            x = bound[1]
            if text:
                words = e.words
                sim = 1.0 if words is None else len(qwords.intersection(words)) / (size or 1)
                x = blend * x + wt * sim
            x += bound[2]
            if floor is not None and round((SLACK + x) / tie) < floor:
                continue  # below the k-th best already, which only rises: never popped
            exact.append(e)
            heappush(heap, (-x, -1, len(exact) - 1))
            continue
        e = exact[at]
        if text and e.words is None:  # split now, back in at its exact bound
            e.words = term_tuple(e.text)
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
            heappush(kth, step)
        elif step > kth[0]:
            heapq.heapreplace(kth, step)
        if len(kth) >= top_k:
            floor = kth[0]
    return matches, count


def by_similarity(
    cards: list[Entry], keys: Keys, query: frozenset[str], blend: float, wt: float, extra: float
) -> tuple[list[Entry], list[float]]:
    """A slice of an ordered list by the most each card can score with its text similarity
    known, as (cards, negated bounds ascending): blend * its key's bound + wt * similarity +
    extra (what support can add). Cards whose words are not split yet are split here, once
    per snapshot, as the walk would when they come up (with similarity 1 they all would)."""
    words: list[tuple[str, ...]] = [e.words for e in cards]  # type: ignore[misc]
    if None in words:
        for i, e in enumerate(cards):
            if words[i] is None:
                e.words = words[i] = term_tuple(e.text)
    size = len(query) or 1
    # the words shared, counted in C (map); no numpy: a serving worker does without it
    tops = [
        blend * -k + wt * (n / size) + extra
        for k, n in zip(keys, map(len, map(query.intersection, words)), strict=True)
    ]
    at = sorted(range(len(tops)), key=tops.__getitem__, reverse=True)
    return list(map(cards.__getitem__, at)), [-tops[i] for i in at]
