"""Many namespaces in bounded memory: past a budget in cards the least recently queried
namespaces leave the cache, are loaded again (current) on their next query, and a query that
still holds an evicted snapshot finishes on it; in either database."""

from __future__ import annotations

import random
import threading

from memory_core.db import session_scope
from memory_core.models.card import Card
from memory_core.models.columns import utcnow
from memory_core.serve.retrieval import retrieve
from memory_core.serve.snapshot import Snapshot
from memory_core.serve.snapshot_cache import SnapshotCache
from tests.helpers.serve import add_card

STATE = {"tool": "search"}


def _scenarios(snap: Snapshot) -> set[str]:
    found = retrieve(snapshot=snap, state=STATE, now=utcnow(), top_k=50).matches
    return {m.entry.scenario for m in found}


def _seed(engine, namespaces: list[str], per: int) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for ns in namespaces:
        out[ns] = {f"{ns}-{i}" for i in range(per)}
        for scenario in sorted(out[ns]):
            add_card(engine, namespace=ns, scenario=scenario, preconditions=['tool == "search"'])
    return out


def test_the_least_recently_queried_namespaces_are_evicted_first(engine) -> None:
    _seed(engine, ["a", "b", "c", "d"], per=2)
    cache = SnapshotCache(engine=engine, refresh_s=0.0, max_cards=4)  # two namespaces
    cache.get("a")
    cache.get("b")
    cache.get("a")  # a is now the more recent
    cache.get("c")
    assert (cache.ready("a"), cache.ready("b"), cache.ready("c")) == (True, False, True)
    cache.get("d")
    assert (cache.ready("a"), cache.ready("c"), cache.ready("d")) == (False, True, True)
    assert cache.evictions == 2 and cache.loads == 4 and cache.cached() == (2, 4)


def test_a_namespace_bigger_than_the_budget_is_served_and_pushes_out_the_rest(engine) -> None:
    expected = _seed(engine, ["small", "big"], per=3)
    cache = SnapshotCache(engine=engine, refresh_s=0.0, max_cards=2)
    assert _scenarios(cache.get("small")) == expected["small"]  # over the budget alone: kept
    assert _scenarios(cache.get("big")) == expected["big"]
    assert not cache.ready("small") and cache.ready("big") and cache.evictions == 1


def test_an_evicted_namespace_is_loaded_again_with_current_data(engine) -> None:
    expected = _seed(engine, ["a", "b"], per=2)
    cache = SnapshotCache(engine=engine, refresh_s=3600.0, max_cards=2)
    held = cache.get("a")  # a query holding the snapshot across the eviction
    cache.get("b")
    assert not cache.ready("a")
    with session_scope(engine) as s:  # changed while out of the cache
        card = s.query(Card).filter(Card.namespace == "a", Card.scenario == "a-0").one()
        card.status, card.version, card.updated_at = "archived", card.version + 1, utcnow()
    add_card(engine, namespace="a", scenario="a-new", preconditions=['tool == "search"'])
    assert _scenarios(held) == expected["a"]  # the held one is intact, as it was
    again = cache.get("a")  # even though refresh_s would keep a cached one an hour
    assert again is not held and cache.loads == 3
    assert _scenarios(again) == {"a-1", "a-new"}


def test_upkeep_of_an_evicted_namespace_stops(engine) -> None:
    _seed(engine, ["a", "b"], per=2)
    cache = SnapshotCache(engine=engine, refresh_s=0.0, max_cards=2, verify_s=0.0)
    held = cache.get("a")
    cache.get("b")
    held.load_s = 0.0  # no spacing of reloads: only the eviction can stop one
    cache._verify("a")  # what the background runs; for an evicted namespace: nothing
    cache._reload("a")
    assert not cache.ready("a") and cache.reloads == 0 and cache.loads == 2
    assert cache.ready("b")


def test_threads_querying_many_namespaces_through_a_tiny_budget_get_their_own_cards(
    engine,
) -> None:
    names = [f"ns{i}" for i in range(8)]
    expected = _seed(engine, names, per=3)
    cache = SnapshotCache(engine=engine, refresh_s=0.0, max_cards=7)  # two namespaces
    wrong: list[tuple[str, set[str]]] = []
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for _ in range(40):
                ns = rnd.choice(names)
                got = _scenarios(cache.get(ns))
                if got != expected[ns]:
                    wrong.append((ns, got))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and wrong == []
    assert cache.evictions > 10
    namespaces, cards = cache.cached()
    assert namespaces <= 3 and cards <= 9  # the budget, or one namespace over it at most


def test_the_service_takes_its_budget_from_the_setting(engine, monkeypatch) -> None:
    import uuid

    from memory_core.serve.keys import Principal
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

    expected = _seed(engine, ["a", "b"], per=2)
    monkeypatch.setenv("HINDSIGHT_SERVE__MAX_CACHED_CARDS", "3")
    svc = MemoryService(engine=engine, settings=Settings())
    for ns in ("a", "b", "a"):
        who = Principal(key_id=uuid.UUID(int=0), namespace=ns, scopes=frozenset({"read"}))
        request = QueryRequest(task_state=STATE, top_k=10, record_use=False)
        cards = svc.query(principal=who, request=request, via="test").cards
        assert {h.card.scenario for h in cards} == expected[ns]
    assert svc.snapshots.loads == 3 and svc.snapshots.evictions == 2


def test_an_evicted_snapshots_used_cards_are_freed_though_loads_freeze_the_heap(engine) -> None:
    import gc

    from memory_core.serve.snapshot import Entry, touched

    _seed(engine, ["a", "b"], per=3)
    cache = SnapshotCache(engine=engine, refresh_s=3600.0, max_cards=3)
    snap = cache.get("a")  # the load freezes the heap (gc.freeze)
    used = next(iter(snap.entries.values()))
    touched(used)  # a use in place: the card waits in snap.touched, which it points back at
    assert snap.touched == [used] and used.home is snap.touched
    card_id = used.card_id
    del snap, used
    try:
        cache.get("b")  # evicts a: nothing but the cycle could keep its used card alive
        assert not cache.ready("a")
    finally:
        gc.unfreeze()  # back into the collector's view, before any collection runs
    left = [o for o in gc.get_objects() if isinstance(o, Entry) and o.card_id == card_id]
    assert left == []  # freed at the eviction, not left to a collector frozen out of it


def test_a_server_preloads_the_keyed_namespaces_within_the_budget(engine) -> None:
    """Before forking its workers: the namespaces unrevoked keys read, loaded in name order
    until the budget is held, with no thread left running."""
    from memory_core.serve.keys import create_key, keyed_namespaces, revoke_key

    seeded = _seed(engine, ["a", "b", "c", "d"], per=2)
    for ns in ("c", "a", "b"):
        create_key(engine=engine, namespace=ns, scopes=["read"])
    revoked = create_key(engine=engine, namespace="d", scopes=["read"])[0]
    revoke_key(engine=engine, key_id=revoked.id)
    assert keyed_namespaces(engine) == ["a", "b", "c"]

    cache = SnapshotCache(engine=engine, refresh_s=60.0, max_cards=4)  # two namespaces
    assert cache.preload(keyed_namespaces(engine)) == 4
    assert [ns for ns in "abcd" if cache.ready(ns)] == ["a", "b"]
    assert len(cache._background) == 0
    assert _scenarios(cache.get("a")) == seeded["a"]
