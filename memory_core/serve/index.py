"""The candidate index of one snapshot: each card filed under one need it cannot hold without.

A need (memory_core.serve.atoms) is an equality (or a few alternatives), a numeric range, a
substring, or, failing those, a variable the state must have. Each card is filed once, under
its most selective need, so a query looks up the state's variables and evaluates only the
cards filed under what the state satisfies. Lists are replaced, never changed in place: a
reader in another thread keeps iterating the list it holds while a change is applied.

Layer: index.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

from memory_core.serve.atoms import Need, state_key
from memory_core.serve.atoms import NeedsMemo as NeedsMemo
from memory_core.serve.atoms import Stats as Stats
from memory_core.serve.atoms import card_needs as card_needs
from memory_core.serve.atoms import chosen_needs as chosen_needs
from memory_core.serve.entry import Entry
from memory_core.serve.index_changes import READERS_KEPT as READERS_KEPT
from memory_core.serve.index_changes import IndexLists, _bins, add_many, remove_many
from memory_core.serve.index_changes import Replaced as Replaced


class CardIndex(IndexLists):
    """Cards by the need they are filed under; `candidates` answers a task state."""

    def add(self, e: Entry, need: Need | None) -> None:
        """File a card under a need (None: evaluated on every query)."""
        add_many(self, [(e, need)])

    def _fill(self, filed: list[tuple[Entry, Need | None]]) -> None:
        """Build from scratch (no reader yet): appended in place, ranges sorted once."""
        ranges: dict[tuple[str, bool], list[tuple[float, int, Entry]]] = {}
        for i, (e, wanted) in enumerate(filed):
            e.filed = need = self._fit(wanted)
            self._read_by(e)
            if need is None:
                self.unindexed.append(e)
            elif need[0] == "eq":
                for var, key in need[1]:
                    self.eq.setdefault(var, {}).setdefault(key, []).append(e)
                self.spread += len({var for var, _ in need[1]}) > 1
            elif need[0] == "range":
                ranges.setdefault((need[1], need[2][0] == ">"), []).append((need[3], i, e))
            elif need[0] == "substring":
                self.substring.setdefault(need[1], {}).setdefault(need[2], []).append(e)
            elif need[0] == "window":
                width, bins = self._window(need)
                for b in _bins(width, need[2], need[3]):
                    bins.setdefault(b, []).append(e)
            else:
                self.has.setdefault(need[1], {})[e.card_id] = e
        for (var, up), items in ranges.items():
            items.sort(key=lambda t: (t[0], t[1]))
            (self.above if up else self.below)[var] = (
                [b for b, _, _ in items],
                [e for _, _, e in items],
            )

    def remove(self, e: Entry) -> None:
        """Take a card out of the list it was filed in."""
        remove_many(self, [e])

    def remove_many(self, gone: Iterable[Entry]) -> None:
        """Take cards out of the lists they were filed in (serve/index_changes.py)."""
        remove_many(self, gone)

    def add_many(self, filed: Iterable[tuple[Entry, Need | None]]) -> None:
        """File cards under their needs, in order (serve/index_changes.py)."""
        add_many(self, filed)

    def candidates(self, state: Mapping[str, Any]) -> list[Entry]:
        """Cards filed under a need the (normalised) state satisfies, plus the unindexed."""
        out = list(self.unindexed)
        for var, value in state.items():
            key = state_key(value)
            by_value = self.eq.get(var)
            if by_value and key is not None:
                out.extend(by_value.get(key, ()))
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if (above := self.above.get(var)) is not None:
                    out.extend(above[1][: bisect_right(above[0], value)])
                if (below := self.below.get(var)) is not None:
                    out.extend(below[1][bisect_left(below[0], value) :])
                if (window := self.windows.get(var)) is not None:
                    out.extend(window[1].get(math.floor(value / window[0]), ()))
            if isinstance(value, str) and (by_text := self.substring.get(var)):
                for text, cards in list(by_text.items()):
                    if text in value:
                        out.extend(cards)
            if (having := self.has.get(var)) is not None:
                out.extend(some(having))
        if self.spread:  # a card filed under `a == 1 || b == 2` may have matched twice
            out = list({id(e): e for e in out}.values())
        return out

    def sample(self, state: Mapping[str, Any], *, limit: int) -> list[Entry]:
        """Up to `limit` cards filed under the state's variables whatever the value, then other
        cards reading them (some: READERS_KEPT), then any: where near misses come from."""
        out: dict[int, Entry] = {}
        groups: list[Iterable[Entry]] = []
        for var in state:
            groups += some(self.eq.get(var))
            groups += [side[var][1] for side in (self.above, self.below) if var in side]
            groups += some(self.substring.get(var))
            if var in self.windows:
                groups += some(self.windows[var][1])
            groups.append(some(self.has.get(var), limit))
        groups += [some(self.readers.get(var), limit) for var in state]
        # a state with few known variables still gets some: any card, up to the limit
        groups += [some(d, limit) for d in some(self.readers)]
        for cards in groups:
            for e in cards:
                out[id(e)] = e
                if len(out) >= limit:
                    return list(out.values())
        return list(out.values())


def some(group: dict[Any, Any] | None, limit: int | None = None) -> list[Any]:
    """Up to `limit` values of a dict that a change applied in another thread may resize
    meanwhile (iterating it then raises): read again."""
    for _ in range(100):
        try:
            return list(islice(group.values(), limit)) if group else []
        except RuntimeError:  # changed size during iteration
            continue
    return []


def build(
    entries: Iterable[Entry], stats: Stats, picks: Iterable[Need | None] | None = None
) -> CardIndex:
    """An index over cards whose needs were counted in stats (picks: each card's chosen need,
    in the order of entries, when already known: atoms.chosen_needs)."""
    index = CardIndex()
    if picks is None:
        index._fill([(e, best_need(e, stats)) for e in entries if not e.broken])
    else:
        index._fill([(e, p) for e, p in zip(entries, picks, strict=True) if not e.broken])
    return index


def best_need(e: Entry, stats: Stats) -> Need | None:
    """The need that lets the fewest queries through (None: the card reads no variable)."""
    return choose(card_needs(e), stats)


def choose(options: list[Need], stats: Stats) -> Need | None:
    """The cheapest of a card's needs (the index narrows a window too wide for its bins)."""
    return min(options, key=stats.cost) if options else None
