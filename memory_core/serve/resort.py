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
from operator import itemgetter
from typing import Any

from memory_core.serve.entry import Entry, untracked
from memory_core.serve.topk import Bounds, Walked

Bound = tuple[int | None, float, float]  # Entry.bound
STEP = 512  # new bounds computed per query across the lists it touches (~1 ms)


@dataclass
class Resort:
    """One list's new order in progress: the bounds computed so far, by card."""

    epoch: Bounds
    done: dict[int, tuple[float, Entry, Bound]] = field(default_factory=dict)
    at: int = 0  # the next position of the list to bound


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
    n = min(len(cards) - progress.at, budget[0])
    if n > 0:
        for e in cards[progress.at : progress.at + n]:
            got = bound(e)
            progress.done[id(e)] = (-(got[1] + got[2]), e, e.bound)
        progress.at += n
        budget[0] -= n
    if progress.at < len(cards):
        return None
    del snap.resorts[name]
    pairs: list[tuple[float, Entry]] = []
    for e in cards:  # the list as it is now: cards added or changed meanwhile bounded here
        had = progress.done.get(id(e))
        if had is not None and had[1] is e and had[2] is e.bound:
            key = had[0]
        else:
            got = bound(e)
            key = -(got[1] + got[2])
        e.sortkey = key
        pairs.append((key, e))
    pairs.sort(key=itemgetter(0))
    return untracked([e for _, e in pairs]), array("d", [k for k, _ in pairs])
