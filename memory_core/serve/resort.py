"""Ordering an index list anew for a renewed epoch in steps, a few hundred cards per query.

An epoch renewed only to tighten the bounds (topk.loosens: time passed, the most-used card
gained uses) leaves every list's old order valid: its keys still bound each card's score, only
more loosely. Sorting every list again at once put the whole cost on the queries right after a
renewal (at 100k cards, ~10 renewals per 2,000 queries each re-sorted every list the following
queries touched: a third of all query time, and the p99). Instead a query keeps walking the
old order and spends at most its budget computing the new bounds of the lists it touches; when
a list's last card is done it is sorted once and replaces the old order. A card changed since
its new bound was computed (a use, feedback, a replacement) is bounded again when the list is
finished, so the new order is exactly what a full sort would make.

Layer: walk.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

from memory_core.serve.entry import Entry, untracked
from memory_core.serve.topk import Bounds, Walked

Bound = tuple[int | None, float, float]  # Entry.bound
STEP = 512  # new bounds computed per query across the lists it touches (~1 ms)


@dataclass
class Resort:
    """One list's new order in progress: the new keys of its first `at` cards, and the card
    and bound each key was computed for (by position: arrays and lists of references, not a
    tuple per card, so a resort of a big list gives the cycle collector nothing to walk)."""

    epoch: Bounds
    keys: array[float] = field(default_factory=lambda: array("d"))
    cards: list[Entry] = field(default_factory=list)
    bounds: list[Bound] = field(default_factory=list)

    @property
    def at(self) -> int:
        """The next position of the list to bound."""
        return len(self.keys)


def resort_step(
    snap: Walked,
    name: Any,
    cards: list[Entry],
    b: Bounds,
    budget: list[int],
    bound: Any,
) -> tuple[list[Entry], array[float]] | None:
    """Spend up to budget[0] new bounds on the list's new order; the order (cards, ascending
    negated keys) once every card is bounded, else None. Hold snap.order_lock."""
    progress: Resort | None = snap.resorts.get(name)
    if progress is None or progress.epoch is not b:
        progress = snap.resorts[name] = Resort(b)
    at = progress.at
    n = min(len(cards) - at, budget[0])
    if n > 0:
        keys, done, bounds = progress.keys, progress.cards, progress.bounds
        for e in cards[at : at + n]:
            got = bound(e)
            keys.append(-(got[1] + got[2]))
            done.append(e)
            bounds.append(e.bound)
        budget[0] -= n
    if progress.at < len(cards):
        return None
    del snap.resorts[name]
    keys, done, bounds = progress.keys, progress.cards, progress.bounds
    for i, e in enumerate(cards):
        # the list as it is now: a card added, moved or changed meanwhile is bounded here
        if done[i] is not e or bounds[i] is not e.bound:
            got = bound(e)
            keys[i] = -(got[1] + got[2])
        e.sortkey = keys[i]
    # positions by key: stable, so ties keep the list's order, as sorting (key, card) pairs did
    order = sorted(range(len(cards)), key=keys.__getitem__)
    return untracked([cards[i] for i in order]), array("d", [keys[i] for i in order])
