"""The candidate index rebuilt from a saved snapshot (serve/snapshot_file.py): each card's need
was chosen before, so filing it is a few appends to lists worked out once per distinct need
(filing card by card through CardIndex._fill was a third of a load from the file).

Layer: index.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memory_core.serve.atoms import Need
from memory_core.serve.entry import Entry
from memory_core.serve.index import CardIndex
from memory_core.serve.index_changes import _bins


@dataclass
class _Plan:
    """Where the cards filed under one need go."""

    need: Need | None
    lists: list[list[Entry]] = field(default_factory=list)
    adds: list[Callable[[Entry], None]] = field(default_factory=list)  # their appends
    puts: list[Callable[[int], None]] = field(default_factory=list)  # their positions' appends
    has: dict[uuid.UUID, Entry] | None = None
    ranged: list[tuple[float, int, Entry]] | None = None
    bound: float = 0.0
    spread: int = 0


def rebuild(
    entries: Sequence[Entry],
    filed: Sequence[int],
    needs: Sequence[Need],
    readers: dict[str, list[int]],
    positions: dict[int, array[int]] | None = None,
) -> CardIndex:
    """The index over cards in their snapshot's order: filed[i] is the position of card i's
    need in needs (-1: reads no variable, -2: broken, not indexed); readers: the cards kept
    per variable for explain, by position; positions: filled with each list's cards' positions
    (by the list's id(): what a saved order is checked against, serve/saved_orders.py)."""
    index = CardIndex()
    # by need position; -1 (unindexed) and -2 (broken: skipped) index from the end
    plans: list[_Plan | None] = [None] * (len(needs) + 2)
    ranges: dict[tuple[str, bool], list[tuple[float, int, Entry]]] = {}
    spread = 0
    for i, (e, f) in enumerate(zip(entries, filed, strict=True)):
        if f == -2:
            continue
        plan = plans[f]
        if plan is None:  # the first card under this need: its lists, in the order _fill made
            plan = plans[f] = _plan(index, None if f == -1 else needs[f], ranges, positions)
        e.filed = plan.need
        e.indexed = True
        for add in plan.adds:
            add(e)
        for put in plan.puts:
            put(i)
        if plan.has is not None:
            plan.has[e.card_id] = e
        elif plan.ranged is not None:
            plan.ranged.append((plan.bound, i, e))
        spread += plan.spread
    index.spread = spread
    for (var, up), items in ranges.items():
        items.sort(key=lambda t: (t[0], t[1]))
        (index.above if up else index.below)[var] = (
            [b for b, _, _ in items],
            [e for _, _, e in items],
        )
    for var, kept in readers.items():
        index.readers[var] = {entries[p].card_id: entries[p] for p in kept}
    return index


def _plan(
    index: CardIndex,
    wanted: Need | None,
    ranges: dict[tuple[str, bool], list[tuple[float, int, Entry]]],
    positions: dict[int, array[int]] | None,
) -> _Plan:
    need = index._fit(wanted)
    plan = _Plan(need)
    if need is None:
        plan.lists.append(index.unindexed)
    elif need[0] == "eq":
        for var, key in need[1]:
            plan.lists.append(index.eq.setdefault(var, {}).setdefault(key, []))
        plan.spread = int(len({var for var, _ in need[1]}) > 1)
    elif need[0] == "range":
        plan.ranged = ranges.setdefault((need[1], need[2][0] == ">"), [])
        plan.bound = need[3]
    elif need[0] == "substring":
        plan.lists.append(index.substring.setdefault(need[1], {}).setdefault(need[2], []))
    elif need[0] == "window":
        width, bins = index._window(need)
        plan.lists.extend(bins.setdefault(b, []) for b in _bins(width, need[2], need[3]))
    else:
        plan.has = index.has.setdefault(need[1], {})
    plan.adds = [cards.append for cards in plan.lists]
    if positions is not None:
        plan.puts = [positions.setdefault(id(cards), array("i")).append for cards in plan.lists]
    return plan
