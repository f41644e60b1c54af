"""The lazy walk over bound-ordered index lists (serve/ordered.py) ranks exactly as scoring
every match, while uses and feedback raise cards in place within one epoch (their places moved
a few per query) and cards are replaced (lists patched), and checks few cards when many hold."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest

from memory_core.models.columns import utcnow
from memory_core.preconditions import compile_all
from memory_core.serve.ordered import FOLD, FOLD_STEP
from memory_core.serve.retrieval import retrieve
from memory_core.serve.snapshot import touched, used
from memory_core.settings import RankingWeights
from tests.memory_core.serve.test_serve_topk import _entry, _key, _snapshot, _weights


def _use_some(rnd: random.Random, snap, now, steps: list[int]) -> None:
    """Served cards get a use (of one of these sizes), some feedback."""
    for _ in range(rnd.choice([0, 3, 9])):
        e = rnd.choice(list(snap.entries.values()))
        e.use_count += rnd.choice(steps)
        e.seen_at = now
        if rnd.random() < 0.3:
            e.confidence = rnd.choice([0.2, 0.95, 1.0])
        snap.max_uses = max(snap.max_uses, e.use_count)
        touched(e)


def _replace_one(rnd: random.Random, snap, confidence) -> None:
    """A card changed elsewhere: replaced, as the change feed does."""
    old = rnd.choice(list(snap.entries.values()))
    snap.index.remove(old)
    del snap.entries[old.card_id]
    snap._add(replace(old, confidence=confidence(old), bound=(None, 0.0, 0.0)))


def test_in_place_changes_within_an_epoch_keep_the_ranking_exact() -> None:
    rnd = random.Random(5)
    now = utcnow()
    for trial in range(12):
        snap = _snapshot([_entry(rnd, now, i) for i in range(rnd.choice([200, 600]))])
        w = _weights(rnd)
        folded = False
        for q in range(60):
            _use_some(rnd, snap, now + timedelta(seconds=q), [1])
            if q % 3 == 0:
                _replace_one(rnd, snap, lambda old: rnd.choice([old.confidence, 0.1, 1.0]))
            state = {"tool": f"t{rnd.randrange(4)}", "retry_count": rnd.randrange(4)}
            if rnd.random() < 0.5:
                state["last_error"] = f"e{rnd.randrange(4)} on x"
            query = rnd.choice([None, "retry page", "cache token limit"])
            top_k = rnd.choice([1, 3, 5])
            kw = dict(snapshot=snap, state=state, now=now, top_k=top_k, weights=w, query=query)
            exhaustive = retrieve(**kw, bounded_from=10**9)  # type: ignore[arg-type]
            waiting = len(snap.touched)
            lazy = retrieve(**kw)  # type: ignore[arg-type]
            # each query moves a few of the waiting cards, more only when over FOLD wait
            moved = waiting - len(snap.touched)
            assert moved <= max(FOLD_STEP, waiting - FOLD), (waiting, moved)
            folded = folded or moved > 0
            assert _key(lazy) == _key(exhaustive), (trial, q, w, state, query, top_k)
            assert lazy.candidates == exhaustive.candidates
        assert folded and len(snap.touched) <= FOLD + 9  # the places were moved


def test_served_cards_used_again_and_again_move_seldom_and_the_ranking_stays_exact() -> None:
    """The service's uses (entry.used): the cards each query serves are used at once, so the
    same few cards gain uses query after query. A use within the uses its keys assume moves
    nothing; past them, or after feedback, it is moved as before. Time passes and the epoch
    renews meanwhile; every query ranks as scoring every match."""
    from memory_core.serve import topk as topk_module

    rnd = random.Random(31)
    start = utcnow()
    uses = moves = 0
    for trial in range(10):
        cards = [_entry(rnd, start, i) for i in range(rnd.choice([300, 900]))]
        for e in cards:  # a namespace in service: its cards used up to hundreds of times
            e.use_count = int(rnd.paretovariate(1.2)) - 1 if rnd.random() < 0.9 else 400
        snap = _snapshot(cards)
        w = _weights(rnd)
        now = start
        for q in range(120):
            now += timedelta(seconds=rnd.choice([1, 1, 30]))
            if q % 40 == 39:  # the epoch ends: recency is bounded from a later time
                now += topk_module.EPOCH + timedelta(minutes=1)
            if q % 7 == 3:  # feedback on a card in place
                e = rnd.choice(list(snap.entries.values()))
                e.confidence = rnd.choice([0.2, 0.95, 1.0])
                touched(e)
            if q % 11 == 5:
                _replace_one(rnd, snap, lambda old: rnd.choice([old.confidence, 0.1, 1.0]))
            state = {"tool": f"t{rnd.randrange(2)}", "retry_count": rnd.randrange(2)}
            query = rnd.choice([None, None, "retry page"])
            top_k = rnd.choice([3, 5])
            kw = dict(snapshot=snap, state=state, now=now, top_k=top_k, weights=w, query=query)
            lazy = retrieve(**kw)  # type: ignore[arg-type]
            exhaustive = retrieve(**kw, bounded_from=10**9)  # type: ignore[arg-type]
            assert _key(lazy) == _key(exhaustive), (trial, q, w, state, query, top_k)
            waiting = len(snap.touched)
            for m in lazy.matches:  # served: used at once, as the service does
                used(m.entry, now)
                snap.max_uses = max(snap.max_uses, m.entry.use_count)
                uses += 1
            moves += len(snap.touched) - waiting
    # most uses of a card served again and again moved nothing
    assert uses > 2000 and moves < uses / 3, (uses, moves)


def test_a_use_past_the_uses_its_keys_assume_moves_the_card() -> None:
    from memory_core.serve.list_orders import fold
    from memory_core.serve.topk import HEADROOM, assumed_uses, epoch

    rnd = random.Random(3)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now, i) for i in range(200)])
    w = RankingWeights()
    e = next(iter(snap.entries.values()))
    assert e.key_uses == -1  # a new card: its first use moves it
    used(e, now)
    assert snap.touched == [e]
    retrieve(snapshot=snap, state={"tool": "t0"}, now=now, weights=w)  # orders the lists
    b = epoch(snap, w, now)
    fold(snap, b, w.support, lambda n: 0.0, 10)
    assert snap.touched == [] and e.key_uses == assumed_uses(e, b)
    assert e.key_uses == e.use_count + max(1, int(b.max_uses * HEADROOM))
    while e.use_count < e.key_uses:  # within what its keys assume: not moved
        used(e, now)
    assert snap.touched == []
    used(e, now)  # one past
    assert snap.touched == [e] and e.key_uses == -1


def test_the_walk_checks_few_of_many_holding_cards() -> None:
    rnd = random.Random(8)
    now = utcnow()
    entries = [_entry(rnd, now, i) for i in range(3000)]
    for e in entries:
        e.compiled = tuple(compile_all(["true"]))  # every card holds, none is indexed
    snap = _snapshot(entries)
    checked: list[int] = []
    from memory_core.serve import retrieval

    real = retrieval.holds

    def counting(*a):  # type: ignore[no-untyped-def]
        checked.append(1)
        return real(*a)

    retrieval.holds = counting  # type: ignore[assignment]
    try:
        lazy = retrieve(snapshot=snap, state={"tool": "t1"}, now=now, weights=RankingWeights())
    finally:
        retrieval.holds = real  # type: ignore[assignment]
    full = retrieve(snapshot=snap, state={"tool": "t1"}, now=now, bounded_from=10**9)
    assert _key(lazy) == _key(full)
    assert 5 <= len(checked) < 300  # of 3000 candidates


def test_explain_serves_and_explains_as_scoring_every_match() -> None:
    """Explain takes the top k from the walk, its near misses from the first candidates that
    fail: the same cards, scores, checks and near misses as scoring every match."""
    import memory_core.serve.retrieval as retrieval

    real_walk, walks = retrieval.first_failing, []

    def walk(*a, **kw):  # type: ignore[no-untyped-def]
        failed, seen = real_walk(*a, **kw)
        walks.append(seen is None)  # stopped at the sample's size, or saw every candidate
        return failed, seen

    retrieval.first_failing = walk  # type: ignore[assignment]
    sample = retrieval.NEAR_MISS_SAMPLE
    try:
        _explain_as_every_match()
        retrieval.NEAR_MISS_SAMPLE = 8  # fewer than the failing candidates: the walk stops
        _explain_as_every_match()
    finally:
        retrieval.first_failing = real_walk  # type: ignore[assignment]
        retrieval.NEAR_MISS_SAMPLE = sample
    assert set(walks) == {True, False}  # both ends of the walk were compared


def _explain_as_every_match() -> None:
    rnd = random.Random(13)
    now = utcnow()
    for trial in range(20):
        snap = _snapshot([_entry(rnd, now, i) for i in range(rnd.choice([100, 500]))])
        w = _weights(rnd)
        for _ in range(10):
            state = {"tool": f"t{rnd.randrange(4)}", "retry_count": rnd.randrange(4)}
            if rnd.random() < 0.5:
                state["last_error"] = f"e{rnd.randrange(4)} on x"
            query = rnd.choice([None, "retry page"])
            kw = dict(snapshot=snap, state=state, now=now, weights=w, query=query, explain=True)
            full = retrieve(**kw, bounded_from=10**9)  # type: ignore[arg-type]
            lazy = retrieve(**kw)  # type: ignore[arg-type]
            assert _key(lazy) == _key(full), (trial, w, state, query)
            assert [m.checks for m in lazy.matches] == [m.checks for m in full.matches]
            assert [(m.entry.card_id, m.checks) for m in lazy.near_misses] == [
                (m.entry.card_id, m.checks) for m in full.near_misses
            ]
            assert lazy.candidates == full.candidates


@pytest.mark.parametrize("how", ["touched", "used"])
def test_queries_from_many_threads_while_cards_are_used_keep_the_ranking_exact(how) -> None:
    """touched: every use reported; used: as the service uses them, moved only past what the
    keys assume (a fold in a query thread raising key_uses while uses come)."""
    import sys
    import threading

    rnd = random.Random(13)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now, i) for i in range(800)])
    w = RankingWeights(support=0.3, text_similarity=0.0)
    states = [{"tool": f"t{t}", "retry_count": r} for t in range(4) for r in range(4)]
    cards = list(snap.entries.values())
    stop, errors = threading.Event(), []

    def query(seed: int) -> None:
        qr = random.Random(seed)
        try:
            while not stop.is_set():
                retrieve(snapshot=snap, state=qr.choice(states), now=now, top_k=3, weights=w)
        except Exception as exc:  # any error in a query thread fails the test below
            errors.append(exc)

    def use() -> None:  # the service's uses: in place, reported as touched
        ur = random.Random(99)
        for _ in range(3000):
            # served cards are the same few again and again: their keys' uses run out
            e = ur.choice(cards[:60] if how == "used" else cards)
            if how == "used":
                used(e, now)
            else:
                e.use_count += 1
                touched(e)
            snap.max_uses = max(snap.max_uses, e.use_count)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # hand the GIL over often: the threads interleave finely
    try:
        threads = [threading.Thread(target=query, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        use()
        stop.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    for state in states:
        kw = dict(snapshot=snap, state=state, now=now, top_k=3, weights=w)
        exhaustive = retrieve(**kw, bounded_from=10**9)  # type: ignore[arg-type]
        assert _key(retrieve(**kw)) == _key(exhaustive), state  # type: ignore[arg-type]


def test_epochs_renewed_to_tighten_keep_the_ranking_exact_and_reorder_in_steps(
    monkeypatch,
) -> None:
    """Time passes and the most-used card gains uses, so epochs renew (topk.loosens): the old
    orders are walked while the new ones are made STEP cards per query, with uses, feedback
    and replacements between; every query still ranks as scoring every match."""
    from memory_core.serve import ordered
    from memory_core.serve import topk as topk_module

    rnd = random.Random(13)
    start = utcnow()
    step = 16  # a few queries per list here, as a few hundred are at 100k cards
    monkeypatch.setattr(ordered, "STEP", step)
    renewals = stepped = finished = walked_big = 0
    for trial in range(8):
        snap = _snapshot([_entry(rnd, start, i) for i in range(rnd.choice([400, 1500]))])
        w = _weights(rnd)
        now = start
        for q in range(90):
            if q % 10 == 9:  # an hour and more passes: recency decays, the epoch renews
                now += topk_module.EPOCH + timedelta(minutes=rnd.randrange(30))
            _use_some(rnd, snap, now, [1, 1, 5])  # the most-used card races ahead
            if q % 4 == 0:
                _replace_one(rnd, snap, lambda _old: rnd.random())
            before = snap.orders_epoch
            big = {name for name, o in snap.orders.items() if len(o[2]) > 2 * step}
            state = {"tool": f"t{rnd.randrange(4)}", "retry_count": rnd.randrange(4)}
            query = rnd.choice([None, "retry page"])
            top_k = rnd.choice([1, 3, 5])
            kw = dict(snapshot=snap, state=state, now=now, top_k=top_k, weights=w, query=query)
            lazy = retrieve(**kw)  # type: ignore[arg-type]
            exhaustive = retrieve(**kw, bounded_from=10**9)  # type: ignore[arg-type]
            assert _key(lazy) == _key(exhaustive), (trial, q, w, state, query, top_k)
            if before is not None and snap.orders_epoch is not before:
                renewals += 1
                # lists of more than a query's steps stay in their old order meanwhile
                kept = [snap.orders.get(name) for name in big]
                assert all(o is not None and o[1] is not snap.orders_epoch for o in kept)
                walked_big += len(big)
            stepped += len(snap.resorts)
            finished += sum(1 for o in snap.orders.values() if o[1] is snap.orders_epoch)
    assert renewals >= 20 and stepped and finished and walked_big, (
        renewals,
        stepped,
        finished,
        walked_big,
    )


def test_a_renewal_for_a_few_more_uses_keeps_the_orders() -> None:
    """The most-used card gains a quarter more uses minutes later: the epoch renews (tighter
    exact bounds) but the lists keep their orders, made anew only once the most uses double
    or time moves on; the ranking stays exact throughout."""
    from memory_core.serve import topk as topk_module

    rnd = random.Random(17)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now, i) for i in range(800)])
    w = RankingWeights()
    state = {"tool": "t1", "retry_count": 1}
    kw = dict(snapshot=snap, state=state, weights=w, top_k=3)

    def query(at):  # type: ignore[no-untyped-def]
        lazy = retrieve(**kw, now=at)  # type: ignore[arg-type]
        assert _key(lazy) == _key(retrieve(**kw, now=at, bounded_from=10**9))  # type: ignore[arg-type]

    query(now)
    first, made = snap.orders_epoch, dict(snap.orders)
    assert made
    snap.max_uses = int(first.max_uses * 1.5) + 2  # past REUSE, within ORDER_REUSE
    query(now + timedelta(minutes=2))
    assert snap.orders_epoch is not first  # renewed
    assert all(snap.orders[name] is o for name, o in made.items())  # the same orders
    assert not snap.resorts
    snap.max_uses = int(first.max_uses * topk_module.ORDER_REUSE) + 5  # doubled since
    query(now + timedelta(minutes=3))
    assert snap.resorts or any(snap.orders[n] is not o for n, o in made.items())


def test_a_batch_of_changes_patches_the_orders_from_what_it_recorded(monkeypatch) -> None:
    """A feed catch-up replaces the lists its cards leave and join, recording what changed;
    the next query patches each order with those cards alone (not comparing whole lists),
    also when a list was replaced twice or a card came and went within the batch, and the
    ranking stays exact."""
    from memory_core.serve import list_orders
    from memory_core.serve.index import card_needs, choose

    rnd = random.Random(29)
    now = utcnow()
    snap = _snapshot([_entry(rnd, now, i) for i in range(900)])
    w = RankingWeights()
    found: list[bool] = []
    real = list_orders._changes

    def spy(*args):  # type: ignore[no-untyped-def]
        out = real(*args)
        found.append(out is not None)
        return out

    monkeypatch.setattr(list_orders, "_changes", spy)
    states = [{"tool": f"t{t}", "retry_count": r} for t in range(4) for r in range(4)]

    def query_all() -> None:
        for state in states:
            for query in (None, "retry page"):
                kw = dict(snapshot=snap, state=state, now=now, top_k=3, weights=w, query=query)
                lazy = retrieve(**kw)  # type: ignore[arg-type]
                assert _key(lazy) == _key(retrieve(**kw, bounded_from=10**9))  # type: ignore[arg-type]

    query_all()
    for _ in range(6):
        snap.index.new_batch()  # as Snapshot.apply begins
        olds = rnd.sample(list(snap.entries.values()), 5)
        news = [replace(o, confidence=rnd.choice([0.1, 1.0]), bound=(None, 0.0, 0.0)) for o in olds]
        snap.index.remove_many(olds)
        for o, n in zip(olds, news, strict=True):
            del snap.entries[o.card_id]
            snap.entries[n.card_id] = n
        snap.index.add_many([(n, choose(card_needs(n), snap.stats)) for n in news])
        extra = replace(news[0], bound=(None, 0.0, 0.0))  # comes and goes again in the batch
        snap.index.add_many([(extra, choose(card_needs(extra), snap.stats))])
        snap.index.remove_many([extra])
        found.clear()
        query_all()
        assert found and all(found), found  # every patch from the recorded changes
    # sorted, patched and folded orders keep their keys where the collector never looks: it
    # reaches no key through them (a list of floats made it read each float's header)
    import gc

    keys = [o[3] for o in snap.orders.values()]
    assert keys and not [x for k in keys for x in gc.get_referents(k) if isinstance(x, float)]


def test_free_text_reads_the_words_of_few_cards_and_ranks_exactly() -> None:
    rnd = random.Random(13)
    now = utcnow()
    one = tuple(compile_all(['tool == "t1"']))
    for trial in range(3):
        entries = [_entry(rnd, now, i) for i in range(3000)]
        for i, e in enumerate(entries):
            e.compiled = one  # one list of 3000 cards
            e.rest = "retry page" + (" lease" if i % 97 == 0 else "")  # a rare word
            e.words = None
        snap = _snapshot(entries)
        w = RankingWeights(text_similarity=rnd.choice([0.3, 0.6]))
        query = rnd.choice(["lease retry", "lease", "page cache"])
        kw = dict(snapshot=snap, state={"tool": "t1"}, now=now, weights=w, query=query)
        lazy = retrieve(**kw)  # type: ignore[arg-type]
        split = sum(e.words is not None for e in entries)
        full = retrieve(**kw, bounded_from=10**9)  # type: ignore[arg-type]
        assert _key(lazy) == _key(full), (trial, query)
        # the walk stops once no unread card can rank: slices of 32, 64, ... read
        assert split < len(entries) // 3, (trial, query, split)
