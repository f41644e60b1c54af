"""The index's candidate lists one by one, named, for the top k walk (serve/ordered.py): which
lists a state reaches, which a card is filed in, and whether a state reaches a card.

Layer: index.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from typing import Any

from memory_core.serve.atoms import state_key
from memory_core.serve.entry import Entry
from memory_core.serve.index import CardIndex, some
from memory_core.serve.index_changes import _bins

# a bucket's name in CardIndex.groups: ("eq", var, key), ("win", var, bin), ("sub", var,
# text), ("un",); None for a list made for one query (a range's slice, the `has` cards)
Group = tuple[tuple[Any, ...] | None, list[Entry]]


def groups(index: CardIndex, state: Mapping[str, Any]) -> list[Group]:
    """The lists `candidates` joins, each named when the index holds it (until a change)."""
    out: list[Group] = [(("un",), index.unindexed)] if index.unindexed else []
    for var, value in state.items():
        key = state_key(value)
        by_value = index.eq.get(var)
        if by_value and key is not None and (cards := by_value.get(key)):
            out.append((("eq", var, key), cards))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if (above := index.above.get(var)) is not None:
                out.append((None, above[1][: bisect_right(above[0], value)]))
            if (below := index.below.get(var)) is not None:
                out.append((None, below[1][bisect_left(below[0], value) :]))
            if (window := index.windows.get(var)) is not None:
                at = math.floor(value / window[0])
                if cards := window[1].get(at):
                    out.append((("win", var, at), cards))
        if isinstance(value, str) and (by_text := index.substring.get(var)):
            for text, cards in list(by_text.items()):
                if text in value and cards:
                    out.append((("sub", var, text), cards))
        if having := index.has.get(var):
            out.append((None, some(having)))
    return out


def homes(index: CardIndex, e: Entry) -> list[Group]:
    """The named lists a card is filed in, as they are now."""
    need = e.filed
    if not e.indexed:
        return []
    if need is None:
        return [(("un",), index.unindexed)]
    if need[0] == "eq":
        return [(("eq", v, k), index.eq.get(v, {}).get(k, [])) for v, k in need[1]]
    if need[0] == "window":
        width, bins = index.windows.get(need[1], (1.0, {}))
        return [(("win", need[1], b), bins.get(b, [])) for b in _bins(width, need[2], need[3])]
    if need[0] == "substring":
        return [(("sub", need[1], need[2]), index.substring.get(need[1], {}).get(need[2], []))]
    return []


def covers(index: CardIndex, e: Entry, state: Mapping[str, Any]) -> bool:
    """True when `candidates(state)` includes the card (it is filed under what holds)."""
    need = e.filed
    if not e.indexed:
        return False
    if need is None:
        return True
    if need[0] == "eq":
        return any(v in state and state_key(state[v]) == k for v, k in need[1])
    if need[0] == "has":
        return need[1] in state
    value = state.get(need[1])
    if need[0] == "substring":
        return isinstance(value, str) and need[2] in value
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    if need[0] == "range":
        return bool(need[3] <= value if need[2][0] == ">" else need[3] >= value)
    width = index.windows[need[1]][0] if need[1] in index.windows else 1.0
    return math.floor(value / width) in _bins(width, need[2], need[3])


def named_lists(index: CardIndex) -> list[Group]:
    """Every list the index holds under a name, as they are now (read again if a change
    applied in another thread resizes a dict meanwhile)."""
    out: list[Group] = [(("un",), index.unindexed)] if index.unindexed else []
    for var, by_value in list(index.eq.items()):
        out += [(("eq", var, key), cards) for key, cards in _items(by_value)]
    for var, (_, bins) in list(index.windows.items()):
        out += [(("win", var, at), cards) for at, cards in _items(bins)]
    for var, by_text in list(index.substring.items()):
        out += [(("sub", var, text), cards) for text, cards in _items(by_text)]
    return out


def named(index: CardIndex, name: tuple[Any, ...] | None) -> list[Entry] | None:
    """The list the index holds under this name now (None: no such list)."""
    if name is None:
        return None
    if name[0] == "un":
        return index.unindexed
    if name[0] == "eq":
        return index.eq.get(name[1], {}).get(name[2])
    if name[0] == "win":
        return index.windows.get(name[1], (1.0, {}))[1].get(name[2])
    return index.substring.get(name[1], {}).get(name[2])


def _items(group: dict[Any, list[Entry]]) -> list[tuple[Any, list[Entry]]]:
    for _ in range(100):
        try:
            return list(group.items())
        except RuntimeError:  # changed size during iteration
            continue
    return []
