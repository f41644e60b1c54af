"""A big snapshot's lists are ordered in the background after its first walk
(memory_core/serve/warm.py): each as a query would order it, rankings exact meanwhile, and
work on a list changed meanwhile (or in an old epoch) dropped, never installed."""

from __future__ import annotations

import gc
import random
import threading
import time
from datetime import timedelta

import pytest

from memory_core.models.columns import utcnow
from memory_core.serve import warm as warm_module
from memory_core.serve.groups import named_lists
from memory_core.serve.list_orders import sorted_order
from memory_core.serve.retrieval import retrieve, specificity
from memory_core.serve.topk import epoch
from memory_core.settings import RankingWeights
from tests.memory_core.serve.test_serve_topk import _entry, _key, _snapshot

STATES = [
    {"tool": f"t{t}", "retry_count": r, "last_error": f"e{e} on x"}
    for t in range(4)
    for r in range(4)
    for e in range(4)
]


def _wait_done(snap, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while snap.warming != "done":
        assert time.monotonic() < deadline, snap.warming
        time.sleep(0.01)


def _in_an_epoch(seed: int):  # type: ignore[no-untyped-def]
    """(a 2,000-card snapshot whose walk has begun an epoch, the time, the weights, the epoch,
    its named lists biggest first)."""
    rnd = random.Random(seed)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now, i) for i in range(2000)])
    w = RankingWeights()
    b = epoch(snap, w, now)
    snap.orders_epoch = b
    lists = sorted(named_lists(snap.index), key=lambda g: -len(g[1]))
    return snap, now, w, b, lists


def test_lists_are_ordered_in_the_background_and_rank_exactly(monkeypatch) -> None:
    monkeypatch.setattr(warm_module, "WARM_FROM", 500)
    monkeypatch.setattr(warm_module, "SMALL", 4)
    monkeypatch.setattr(warm_module, "PAUSE_S", 0.0)
    rnd = random.Random(3)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now, i) for i in range(3000)])
    w = RankingWeights()
    big = [(name, cards) for name, cards in named_lists(snap.index) if len(cards) >= 4]
    assert len(big) >= 5
    first = retrieve(snapshot=snap, state=STATES[0], now=now, weights=w)
    assert snap.warming is not None
    _wait_done(snap)
    b = snap.orders_epoch
    for name, cards in big:  # every list ordered, as a query orders it
        made = snap.orders[name]
        assert made[0] is cards and made[1] is b
        keys = made[3]
        assert list(keys) == sorted(keys)
        assert sorted(map(id, made[2])) == sorted(map(id, cards))
        for e, k in zip(made[2], keys, strict=True):
            assert k == -(e.bound[1] + e.bound[2])
    assert _key(first) == _key(retrieve(snapshot=snap, state=STATES[0], now=now, weights=w))
    # the orders are out of the collector's generations: a full pass does not walk them
    gc.collect()  # whatever the collector tracks is in its oldest generation now
    scanned = {id(o) for o in gc.get_objects(generation=2)}
    assert not any(id(snap.orders[name][2]) in scanned for name, _ in big)
    for state in STATES:
        for query in (None, "same words"):
            kw = dict(snapshot=snap, state=state, now=now, weights=w, query=query)
            assert _key(retrieve(**kw)) == _key(retrieve(**kw, bounded_from=10**9))  # type: ignore[arg-type]


def test_a_small_snapshot_starts_no_thread() -> None:
    rnd = random.Random(4)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now, i) for i in range(300)])
    retrieve(snapshot=snap, state=STATES[0], now=now)
    assert snap.warming == "small"
    assert snap.orders.keys() <= {name for name, _ in named_lists(snap.index)}


@pytest.mark.parametrize("moved", ["list", "epoch"])
def test_work_on_a_list_changed_meanwhile_is_dropped(monkeypatch, moved: str) -> None:
    snap, now, _, b, lists = _in_an_epoch(5)
    victim_name, victim = lists[0]
    real = warm_module.sorted_order
    calls: list[int] = []

    def changing(cards, bb, spec):  # type: ignore[no-untyped-def]
        order = real(cards, bb, spec)
        if not calls:  # another thread applies a change while the first list is ordered
            if moved == "list":
                snap.index.remove(victim[0])  # the list is replaced, not changed in place
            else:
                snap.orders_epoch = epoch(snap, RankingWeights(confidence=0.9), now)
        calls.append(1)
        return order

    monkeypatch.setattr(warm_module, "sorted_order", changing)
    made = warm_module.warm(snap, b, specificity, pause_s=0.0)
    assert victim_name not in snap.orders
    if moved == "list":  # the others are ordered
        assert made == len([1 for _, cards in lists if len(cards) >= warm_module.SMALL]) - 1
        assert made > 0
    else:  # a newer epoch orders anew: nothing more is done
        assert made == 0 and len(calls) == 1


def test_a_card_changed_and_folded_while_its_list_is_ordered_drops_that_order(
    monkeypatch,
) -> None:
    """A use raises a card after the background bounded it, and a query's fold takes it off
    the waiting list before the order is installed (the fold finds no order to move it in):
    the order, which holds the card at its old bound, is dropped; the ranking stays exact."""
    from memory_core.serve.list_orders import fold
    from memory_core.serve.snapshot import touched

    snap, now, w, b, lists = _in_an_epoch(6)
    victim_name, victim = lists[0]
    real = warm_module.sorted_order
    raised = []

    def racing(cards, bb, spec):  # type: ignore[no-untyped-def]
        order = real(cards, bb, spec)
        if cards is victim:  # bounded; now the lowest card of it is used a lot, and folded
            e = order[0][-1]
            e.use_count += 50
            e.seen_at = now
            e.confidence = 1.0
            snap.max_uses = max(snap.max_uses, e.use_count)
            touched(e)
            with snap.order_lock:
                fold(snap, bb, w.support, spec, 64)
            raised.append(e)
        return order

    monkeypatch.setattr(warm_module, "sorted_order", racing)
    warm_module.warm(snap, b, specificity, pause_s=0.0)
    assert raised and not snap.touched
    assert victim_name not in snap.orders
    for state in STATES:
        kw = dict(snapshot=snap, state=state, now=now, weights=w, top_k=1)
        assert _key(retrieve(**kw)) == _key(retrieve(**kw, bounded_from=10**9))  # type: ignore[arg-type]


def test_a_dropped_snapshot_is_not_ordered() -> None:
    from memory_core.serve.snapshot_build import release

    snap, _, _, b, _ = _in_an_epoch(7)
    release(snap)  # evicted or replaced before its ordering began
    assert warm_module.warm(snap, b, specificity, pause_s=0.0) == 0
    assert not snap.orders


def _walked_while_ordered(monkeypatch, snap, now, w, old, big) -> None:  # type: ignore[no-untyped-def]
    """Queries while the background orders the lists for a newer epoch than `old` (held back
    until they are done): exact rankings on the old orders, no resort steps; then the new
    orders installed for every big list."""
    gate = threading.Event()
    real = warm_module.sorted_order

    def held_back(cards, bb, spec):  # type: ignore[no-untyped-def]
        assert gate.wait(20)
        return real(cards, bb, spec)

    monkeypatch.setattr(warm_module, "sorted_order", held_back)
    try:
        for state in STATES[:24]:
            for query in (None, "same words"):
                kw = dict(snapshot=snap, state=state, now=now, weights=w, query=query)
                assert _key(retrieve(**kw)) == _key(retrieve(**kw, bounded_from=10**9))  # type: ignore[arg-type]
        new = snap.orders_epoch
        assert new is not old and snap.warming == "started"
        assert not snap.resorts  # walked, not resorted, while the background is on them
        assert all(snap.orders[name][1] is old for name, _ in big)
    finally:
        gate.set()
    _wait_done(snap)
    assert all(snap.orders[name][1] is new for name, _ in big)


def test_orders_too_old_to_stand_are_made_again_in_the_background(monkeypatch) -> None:
    """A restored file's orders are of the epoch it was saved in: valid for a later one (its
    keys still bound every score) but looser than close_enough lets stand. The background
    orders those lists again while queries walk the old orders without resorting them in
    steps; rankings are exact throughout, and the new orders are installed."""
    monkeypatch.setattr(warm_module, "WARM_FROM", 500)
    monkeypatch.setattr(warm_module, "SMALL", 4)
    monkeypatch.setattr(warm_module, "PAUSE_S", 0.0)
    rnd = random.Random(8)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now - timedelta(hours=3), i) for i in range(3000)])
    w = RankingWeights()
    old = epoch(snap, w, now - timedelta(hours=2))
    snap.orders_epoch = old
    big = [(name, cards) for name, cards in named_lists(snap.index) if len(cards) >= 4]
    assert len(big) >= 5
    for name, cards in big:  # as saved_orders.install leaves them
        snap.orders[name] = (cards, old, *sorted_order(cards, old, specificity))
    _walked_while_ordered(monkeypatch, snap, now, w, old, big)
    for state in STATES:
        kw = dict(snapshot=snap, state=state, now=now, weights=w)
        assert _key(retrieve(**kw)) == _key(retrieve(**kw, bounded_from=10**9))  # type: ignore[arg-type]


def test_a_renewed_epoch_is_ordered_in_the_background_not_in_the_queries(monkeypatch) -> None:
    """The most-used card's count grows past what the orders stand for (close_enough): the
    lists of a big snapshot are ordered for the new epoch in the background while queries walk
    the old orders, resorting nothing in steps; rankings are exact throughout, and the
    collector's generations are frozen after the first ordering only."""
    monkeypatch.setattr(warm_module, "WARM_FROM", 500)
    monkeypatch.setattr(warm_module, "SMALL", 4)
    monkeypatch.setattr(warm_module, "PAUSE_S", 0.0)
    frozen: list[int] = []
    monkeypatch.setattr(warm_module.gc, "freeze", lambda: frozen.append(1))
    rnd = random.Random(9)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now - timedelta(hours=3), i) for i in range(3000)])
    w = RankingWeights()
    retrieve(snapshot=snap, state=STATES[0], now=now, weights=w)
    _wait_done(snap)
    old = snap.orders_epoch
    big = [(name, cards) for name, cards in named_lists(snap.index) if len(cards) >= 4]
    assert len(big) >= 5 and all(snap.orders[name][1] is old for name, _ in big)
    snap.max_uses = old.max_uses * 3 + 10  # uses since: bounds renewed, orders too loose
    _walked_while_ordered(monkeypatch, snap, now, w, old, big)
    assert frozen == [1]
    for state in STATES:
        kw = dict(snapshot=snap, state=state, now=now, weights=w)
        assert _key(retrieve(**kw)) == _key(retrieve(**kw, bounded_from=10**9))  # type: ignore[arg-type]
