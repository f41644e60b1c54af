"""Explain's near misses: the cards closest to applying to a state, found without listing every
candidate. At 100k cards an explained query built the whole candidate list and a set of its
ids (0.8 ms) and a Check per condition of 128 cards (0.6 ms) to keep ten of them; a plain
query took 0.7 ms.

Layer: index.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Any

from memory_core.preconditions import CompiledPrecondition
from memory_core.serve.entry import Entry
from memory_core.serve.groups import Group


def first_failing(
    lists: Sequence[Group],
    *,
    holds: Callable[[Entry], bool],
    skip: set[int],
    kinds: Sequence[str],
    limit: int,
) -> tuple[list[Entry], set[int] | None]:
    """The first `limit` candidates (the lists' cards in order, each once) that do not hold,
    none of `skip`; and the ids of every candidate when the walk saw them all (None: it
    stopped at the limit, so the sample beyond them is not needed)."""
    failed: list[Entry] = []
    seen: set[int] = set()
    for e in chain.from_iterable(cards for _, cards in lists):
        key = id(e)
        if key in seen:  # a card filed under `a == 1 || b == 2` may be in two lists
            continue
        seen.add(key)
        if key in skip or e.broken or e.kind not in kinds:
            continue
        if not holds(e):
            failed.append(e)
            if len(failed) >= limit:
                return failed, None
    return failed, seen


def held_count(compiled: Sequence[CompiledPrecondition], context: Any, keys: frozenset[str]) -> int:
    """How many preconditions hold: the conditions `check` says `held`, without a Check each."""
    n = 0
    for c in compiled:
        if not c.variables <= keys:
            continue
        try:
            n += c.program.execute(context) is True
        except (RuntimeError, KeyError, TypeError):
            continue
    return n


def closest(
    pool: Iterable[Entry],
    *,
    held: Callable[[Entry], int],
    score: Callable[[Entry], float],
    n: int,
) -> list[Entry]:
    """The n cards of the pool with the most conditions held, then the best score, then by id;
    scores are computed only for the cards whose count can make the cut."""
    counted = sorted(((held(e), e) for e in pool), key=lambda he: -he[0])
    if n <= 0 or not counted:
        return []
    cut = counted[min(n, len(counted)) - 1][0]
    # a UUID's number orders as its text: the tie-break without a string per card
    ranked = heapq.nsmallest(
        n, (((-h, -score(e), e.card_id.int), e) for h, e in counted if h >= cut), key=_first
    )
    return [e for _, e in ranked]


def _first(pair: tuple[Any, Entry]) -> Any:
    return pair[0]
