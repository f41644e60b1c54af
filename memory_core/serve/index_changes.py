"""Batches of changes to a card index (serve/index.py): the lists a batch of cards leaves
and joins are each replaced once, never changed in place (a reader in another thread keeps
iterating the list it holds), and each replaced named list is recorded with what changed in it
(IndexLists.replaced), so that an order of the old list is patched with those cards alone.

Layer: index.
"""

from __future__ import annotations

import math
import uuid
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from memory_core.serve.atoms import AtomKey, Need
from memory_core.serve.entry import Entry, untracked

# a named list replaced by a batch of changes: (the new list, the old, cards gone, cards added)
Replaced = tuple[list["Entry"], list["Entry"], list["Entry"], list["Entry"]]
MAX_BINS = 64  # a window wider than this many bins is filed as a one-sided range
READERS_KEPT = 512  # cards kept per variable for explain's sample (it asks for 256)


def _bins(width: float, lo: float, hi: float) -> range:
    return range(math.floor(lo / width), math.floor(hi / width) + 1)


class IndexLists:
    """The lists of a card index (serve/index.py) and what a batch of changes replaces."""

    def __init__(self) -> None:
        self.eq: dict[str, dict[AtomKey, list[Entry]]] = {}
        # card needs value > bound ("above") or value < bound ("below"): sorted bounds + cards
        self.above: dict[str, tuple[list[float], list[Entry]]] = {}
        self.below: dict[str, tuple[list[float], list[Entry]]] = {}
        self.substring: dict[str, dict[str, list[Entry]]] = {}
        # lo <= value <= hi on one variable: fixed-width bins (the first window's width)
        self.windows: dict[str, tuple[float, dict[int, list[Entry]]]] = {}
        # big groups (every card reading `tool`) are dicts: a change is O(1), where copying a
        # list of 90k cards per changed card cost seconds a minute under steady feedback;
        # readers copy them in one C call (list(...)), which no other thread interleaves
        self.has: dict[str, dict[uuid.UUID, Entry]] = {}
        self.unindexed: list[Entry] = []  # reads no variable: evaluated on every query
        # some cards reading each variable, where explain finds near misses: READERS_KEPT of
        # them, not all (a dict entry per card and variable was ~75 MB at a million cards)
        self.readers: dict[str, dict[uuid.UUID, Entry]] = {}
        self.spread = 0  # cards filed under equalities of several variables (may repeat)
        # the named lists the last batch of changes replaced, by id of the new list: (new, old,
        # cards gone, cards added), so that an order of the old list is patched with what
        # changed rather than by comparing the two whole lists (serve/list_orders.py)
        self.replaced: dict[int, Replaced] = {}

    def new_batch(self) -> None:
        """Forget the lists earlier changes replaced (kept for one batch of changes)."""
        self.replaced = {}

    def _fit(self, need: Need | None) -> Need | None:
        """A window too wide for its variable's bins becomes its lower bound (also needed)."""
        if need is None or need[0] != "window":
            return need
        width = self.windows[need[1]][0] if need[1] in self.windows else need[3] - need[2]
        if len(_bins(max(width, 1.0), need[2], need[3])) <= MAX_BINS:
            return need
        return ("range", need[1], ">=", need[2])

    def _read_by(self, e: Entry) -> None:
        for c in e.compiled:
            for var in c.variables:
                kept = self.readers.setdefault(var, {})
                if len(kept) < READERS_KEPT:
                    kept[e.card_id] = e

    def _window(self, need: Need) -> tuple[float, dict[int, list[Entry]]]:
        width, bins = self.windows.setdefault(need[1], (max(need[3] - need[2], 1.0), {}))
        return width, bins


def _drop(group: dict[uuid.UUID, Entry] | None, e: Entry) -> None:
    if group is not None and group.get(e.card_id) is e:
        del group[e.card_id]


def _variables(e: Entry) -> set[str]:
    return {v for c in e.compiled for v in c.variables}


def _swap(
    index: IndexLists, old: list[Entry], new: list[Entry], gone: list[Entry], added: list[Entry]
) -> None:
    index.replaced[id(new)] = (new, old, gone, added)


def add_many(index: IndexLists, filed: Iterable[tuple[Entry, Need | None]]) -> None:
    """File cards under their needs, in order; each list they join is replaced once."""
    joins: dict[tuple[Any, ...], list[Entry]] = {}  # a list's address: its new cards
    ranges: dict[tuple[str, str], list[tuple[float, Entry]]] = {}
    for e, wanted in filed:
        need = index._fit(wanted)
        e.filed = need
        index._read_by(e)
        if need is None:
            joins.setdefault(("none",), []).append(e)
        elif need[0] == "eq":
            for var, key in need[1]:
                joins.setdefault(("eq", var, key), []).append(e)
            index.spread += len({var for var, _ in need[1]}) > 1
        elif need[0] == "range":
            ranges.setdefault((need[1], need[2]), []).append((need[3], e))
        elif need[0] == "substring":
            joins.setdefault(("substring", need[1], need[2]), []).append(e)
        elif need[0] == "window":
            width, _ = index._window(need)
            for b in _bins(width, need[2], need[3]):
                joins.setdefault(("window", need[1], b), []).append(e)
        else:
            index.has.setdefault(need[1], {})[e.card_id] = e
    for address, cards in joins.items():
        if address[0] == "none":
            old = index.unindexed
            index.unindexed = new = untracked([*old, *cards])
        else:
            group, key = _group(index, address)
            old = group.get(key, [])
            group[key] = new = untracked([*old, *cards])
        _swap(index, old, new, [], cards)
    for (var, op), items in ranges.items():
        side = index.above if op[0] == ">" else index.below
        bounds, cards = side.get(var, ([], []))
        bounds, cards = list(bounds), untracked(list(cards))  # copies: readers keep the old ones
        for bound, e in items:
            at = bisect_right(bounds, bound)
            bounds.insert(at, bound)
            cards.insert(at, e)
        side[var] = (bounds, cards)


def _group(index: IndexLists, address: tuple[Any, ...]) -> tuple[dict[Any, list[Entry]], Any]:
    """The dict holding a list of cards, and its key there."""
    kind = address[0]
    if kind == "eq":
        return index.eq.setdefault(address[1], {}), address[2]
    if kind == "substring":
        return index.substring.setdefault(address[1], {}), address[2]
    return index.windows[address[1]][1], address[2]


def remove_many(index: IndexLists, gone: Iterable[Entry]) -> None:
    """Take cards out of the lists they were filed in; each list is replaced once (a card
    at a time copied a list of thousands per card: most of a feed catch-up's time)."""
    leaves: dict[tuple[Any, ...], list[Entry]] = {}
    for e in gone:
        need = e.filed
        for var in _variables(e):
            _drop(index.readers.get(var), e)
        if need is None:
            leaves.setdefault(("none",), []).append(e)
        elif need[0] == "eq":
            for var, key in need[1]:
                leaves.setdefault(("eq", var, key), []).append(e)
            index.spread -= len({var for var, _ in need[1]}) > 1
        elif need[0] == "range":
            leaves.setdefault(("range", need[1], need[2][0] == ">"), []).append(e)
        elif need[0] == "substring":
            leaves.setdefault(("substring", need[1], need[2]), []).append(e)
        elif need[0] == "window":
            width, _ = index._window(need)
            for b in _bins(width, need[2], need[3]):
                leaves.setdefault(("window", need[1], b), []).append(e)
        else:
            _drop(index.has.get(need[1]), e)
    for address, cards in leaves.items():
        if address[0] == "none":
            old = index.unindexed
            index.unindexed = new = _without(old, cards)
            _swap(index, old, new, cards, [])
        elif address[0] == "range":
            side = index.above if address[2] else index.below
            bounds, listed = side.get(address[1], ([], []))
            bounds, listed = list(bounds), untracked(list(listed))
            for at in sorted(_places(listed, cards), reverse=True):
                del bounds[at], listed[at]
            side[address[1]] = (bounds, listed)
        else:
            group, key = _group(index, address)
            old = group.get(key, [])
            group[key] = new = _without(old, cards)
            _swap(index, old, new, cards, [])


def _places(cards: list[Entry], gone: list[Entry]) -> list[int]:
    """Where these cards are in the list, found by identity at C speed (a Python loop over
    the list was most of a feed catch-up, and list.index would call Entry's __eq__)."""
    ids = list(map(id, cards))
    out = []
    for e in gone:
        try:
            out.append(ids.index(id(e)))
        except ValueError:  # not there (never filed there): nothing to take out
            continue
    return out


def _without(cards: list[Entry], gone: list[Entry]) -> list[Entry]:
    """A copy of the list without these cards (readers keep the old list)."""
    kept = untracked(list(cards))
    for at in sorted(_places(kept, gone), reverse=True):
        del kept[at]
    return kept
