"""The index's lists kept in order of their cards' score bounds for one epoch (the walk of
serve/ordered.py reads them): ordering a list, patching one a few changed cards replaced, and
moving touched cards to their new places.

Layer: walk.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any, TypeAlias

from memory_core.serve.entry import Entry, support_of, untracked
from memory_core.serve.groups import homes
from memory_core.serve.index_changes import Replaced
from memory_core.serve.resort import resort_step
from memory_core.serve.topk import (
    UNBOUNDED,
    Bounds,
    Walked,
    assumed_uses,
    base_bound,
    close_enough,
    loosens,
    support_bound,
)

# cards and their negated keys, ascending; the most support of each kind among them. The keys
# are an array of doubles, which the garbage collector never walks: as a list of floats, each
# query's fold copied a few lists of thousands into the young generation, and every collection
# of it read each key's header (a cache miss each: 2-6 ms a collection at 100k cards, one
# collection in ten queries)
Keys: TypeAlias = "array[float]"  # a string: array is not subscriptable at run time in 3.11
Order = tuple[list[Entry], Keys, dict[str, int]]


def bound_of(e: Entry, b: Bounds, sup: float, spec: Callable[[int], float]) -> tuple[Any, ...]:
    bound = e.bound
    if bound[0] != b.serial:
        parts = (e.confidence, e.seen_at, e.use_count)
        bound = (b.serial, base_bound(e, b, spec), support_bound(sup, e.trust))
        e.bound = bound
        if (e.confidence, e.seen_at, e.use_count) != parts:  # changed meanwhile
            e.bound = (None, 0.0, 0.0)
            return (b.serial, UNBOUNDED, bound[2])
    return bound


def order_of(
    snap: Walked, name: Any, cards: list[Entry], b: Bounds, spec: Any, budget: list[int]
) -> Order:
    """The list's cards by bound (standing plus support), highest first, cached per epoch;
    a list replaced by a few cards changed is patched, not sorted again; after an epoch that
    only tightens the bounds, the old order is walked while the new one is made in steps
    (serve/resort.py)."""
    cached = snap.orders.get(name)
    if cached is not None and (cached[1] is b or loosens(cached[1], b)):
        order: Order | None = (cached[2], cached[3], cached[4])
        if cached[0] is not cards and (order := _patch(snap, cached, cards, b, spec)) is not None:
            snap.orders[name] = cached = (cards, cached[1], *order)
        if order is not None:
            # a restored file's orders, older than close_enough allows, and a big snapshot's
            # after a renewal are made again by the background ordering (serve/warm.py):
            # walked meanwhile, not resorted here
            if (
                cached[1] is b
                or close_enough(cached[1], b)
                or snap.warming in (None, "started", "renewed")
            ):
                return order
            sup = b.weights.support
            made = resort_step(snap, name, cards, b, budget, lambda e: bound_of(e, b, sup, spec))
            if made is None:
                return order  # valid, looser: its keys still bound every card's score
            order = (made[0], made[1], _most(made[0], b.weights.support_counts))
            snap.orders[name] = (cards, b, *order)
            return order
    order = sorted_order(cards, b, spec)
    if name is not None:
        snap.orders[name] = (cards, b, *order)
    return order


def sorted_order(cards: list[Entry], b: Bounds, spec: Callable[[int], float]) -> Order:
    """The list's cards by bound, highest first, sorted whole (needs no lock: it reads the
    cards and writes only their bounds, as any query does)."""
    w = b.weights
    pairs: list[tuple[float, Entry]] = []
    for e in cards:
        bound = bound_of(e, b, w.support, spec)
        e.sortkey = key = -(bound[1] + bound[2])  # one float, shared with the list's keys
        pairs.append((key, e))
    pairs.sort(key=lambda p: p[0])
    entries = untracked([e for _, e in pairs])
    return entries, array("d", [k for k, _ in pairs]), _most(entries, w.support_counts)


def _most(entries: list[Entry], counts: str) -> dict[str, int]:
    most: dict[str, int] = {}
    for e in entries:
        if not e.broken:
            most[e.kind] = max(most.get(e.kind, 0), support_of(e, counts))
    return most


PATCH = 16  # a list with more cards changed than this is sorted again


def _patch(
    snap: Walked, cached: tuple[Any, ...], cards: list[Entry], b: Bounds, spec: Any
) -> Order | None:
    changed = _changes(snap.index.replaced, cached[0], cards)
    if changed is None:
        # the differences by identity at C speed: the lists run to thousands of cards, and a
        # fold patches every list a changed card left (a loop over each was most of a slow query)
        old = dict(zip(map(id, cached[2]), cached[2], strict=True))
        new = dict(zip(map(id, cards), cards, strict=True))
        changed = (
            [old[i] for i in old.keys() - new.keys()],
            [new[i] for i in new.keys() - old.keys()],
        )
    gone, added = changed
    if len(gone) + len(added) > PATCH:
        return None
    entries, keys = untracked(list(cached[2])), array("d", cached[3])
    counts = b.weights.support_counts
    most = dict(cached[4])
    lost: set[str] = set()  # kinds whose most-supported card left: recounted unless matched
    for e in gone:
        if (at := _find(entries, keys, e)) >= 0:
            del entries[at], keys[at]
        if not e.broken and support_of(e, counts) >= most.get(e.kind, 0):
            lost.add(e.kind)
    came: dict[str, int] = {}
    for e in added:
        bound = bound_of(e, b, b.weights.support, spec)
        e.sortkey = key = -(bound[1] + bound[2])
        at = bisect_right(keys, key)
        entries.insert(at, e)
        keys.insert(at, key)
        if not e.broken:
            came[e.kind] = max(came.get(e.kind, 0), support_of(e, counts))
    # a card replaced by its own new version usually brings the same support back
    if any(came.get(k, -1) < most.get(k, 0) for k in lost):
        return entries, keys, _most(entries, counts)
    for k, n in came.items():
        most[k] = max(most.get(k, 0), n) if k not in lost else n
    return entries, keys, most


def _changes(
    replaced: dict[int, Replaced], old: list[Entry], cards: list[Entry]
) -> tuple[list[Entry], list[Entry]] | None:
    """The cards gone from and added to the old list to make this one, from the replacements
    the last batch of changes recorded (None: not all there; the lists are then compared)."""
    steps: list[Replaced] = []
    at = cards
    while at is not old:
        step = replaced.get(id(at))
        if step is None or step[0] is not at or len(steps) > 8:
            return None
        steps.append(step)
        at = step[1]
    added: dict[int, Entry] = {}
    gone: list[Entry] = []
    for _, _, left, came in reversed(steps):  # oldest first: a card may come and go again
        for e in left:
            if added.pop(id(e), None) is None:
                gone.append(e)
        for e in came:
            added[id(e)] = e
    return gone, list(added.values())


def _find(entries: list[Entry], keys: Keys, e: Entry) -> int:
    """Where the card is in an ordered list (-1: not there)."""
    old = e.sortkey
    at = bisect_left(keys, old)
    while at < len(keys) and keys[at] == old and entries[at] is not e:
        at += 1
    if at < len(keys) and entries[at] is e:
        return at
    # ordered under another key (its other list was ordered after a change)
    return next((i for i, x in enumerate(entries) if x is e), -1)


def fold(snap: Walked, b: Bounds, sup: float, spec: Any, limit: int) -> None:
    """Move the first `limit` touched cards to their places in the ordered lists, each list
    copied once (hold snap.order_lock). A list ordered in an earlier epoch that b loosens keeps
    its epoch: it is still ordered anew in steps (serve/resort.py)."""
    n = min(len(snap.touched), limit)
    moves: dict[Any, tuple[list[Entry], list[tuple[Entry, float]]]] = {}
    placed: list[tuple[Entry, float, int]] = []
    for e in {id(e): e for e in snap.touched[:n]}.values():
        # a bound made here, so the uses its keys assume are known: a query may have cached
        # one made at fewer uses meanwhile
        e.bound = (None, 0.0, 0.0)
        count, seen = e.use_count, e.seen_at
        bound = bound_of(e, b, sup, spec)
        new = -(bound[1] + bound[2])
        fresh = e.bound is bound and e.use_count == count and e.seen_at is seen
        placed.append((e, new, assumed_uses(e, b) if fresh else -1))
        for name, cards in homes(snap.index, e):
            moves.setdefault(name, (cards, []))[1].append((e, new))
    for name, (cards, moved) in moves.items():
        cached = snap.orders.get(name)
        if cached is None or (cached[1] is not b and not loosens(cached[1], b)):
            # no order, or one of an epoch it does not bound: sorted anew, under the lock by
            # a query; an order the background made meanwhile (serve/warm.py) holds this card
            # at its bound before the change, so it must not be installed
            snap.unplaced.add(name)
            continue
        if cached[0] is cards:
            entries, keys, most = untracked(list(cached[2])), array("d", cached[3]), cached[4]
        elif (patched := _patch(snap, cached, cards, b, spec)) is not None:
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
    for e, new, uses in placed:
        e.sortkey = new
        # its keys now all assume `uses` (lists without an order are ordered from its bound)
        e.key_uses = uses
    del snap.touched[:n]
