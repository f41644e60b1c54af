"""Explain's near-miss helpers (serve/near_misses.py) against the plain rules they shortcut:
the first failing candidates, each once; the closest by conditions held, score, then id."""

from __future__ import annotations

import random
import uuid
from types import SimpleNamespace

from memory_core.serve.near_misses import closest, first_failing


def _card(i: int, kind: str = "experience", broken: bool = False) -> SimpleNamespace:
    # ids spread over the whole range, as random ones are: the tie-break orders them by number
    card_id = uuid.UUID(int=(i * 0x9E3779B97F4A7C15F39CC0605CEDC835) % 2**128)
    return SimpleNamespace(i=i, card_id=card_id, kind=kind, broken=broken)


def test_the_walk_gives_each_card_once_skips_what_it_must_and_stops_at_the_limit() -> None:
    cards = [_card(i) for i in range(10)]
    cards[3].broken, cards[4].kind = True, "fact"
    lists = [(None, cards[:6]), (("eq",), cards[2:])]  # cards 2-5 filed twice
    fails = {id(c) for c in cards if c.i % 2 == 0}
    holds = lambda e: id(e) not in fails  # noqa: E731
    kw = dict(holds=holds, skip={id(cards[8])}, kinds=("experience",))
    failed, seen = first_failing(lists, **kw, limit=100)  # type: ignore[arg-type]
    assert [c.i for c in failed] == [0, 2, 6]  # 4: a fact, 8: skipped
    assert seen == {id(c) for c in cards}  # every candidate seen: the sample may follow
    failed, seen = first_failing(lists, **kw, limit=2)  # type: ignore[arg-type]
    assert [c.i for c in failed] == [0, 2] and seen is None


def test_the_closest_are_those_a_full_sort_keeps() -> None:
    rnd = random.Random(3)
    for _ in range(300):
        pool = [_card(i) for i in rnd.sample(range(1000), rnd.randrange(0, 40))]
        held = {id(c): rnd.randrange(3) for c in pool}
        score = {id(c): rnd.choice([0.1, 0.5, 0.5, 0.9]) for c in pool}
        n = rnd.randrange(0, 12)
        asked: list[object] = []

        def scored(e, score=score, asked=asked):  # type: ignore[no-untyped-def]
            asked.append(e)
            return score[id(e)]

        got = closest(pool, held=lambda e, held=held: held[id(e)], score=scored, n=n)
        full = sorted(pool, key=lambda e: (-held[id(e)], -score[id(e)], str(e.card_id)))
        assert got == full[:n]
        if n and pool:  # cards below the n-th's count are never scored
            cut = held[id(full[min(n, len(full)) - 1])]
            assert all(held[id(e)] >= cut for e in asked)
