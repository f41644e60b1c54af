"""Snapshots follow the card change feed: a changed, new, archived or superseded card is served
as it now is without reloading the namespace, in either database, one namespace at a time."""

from __future__ import annotations

import time

from sqlmodel import Session

from memory_core.db import session_scope
from memory_core.models.card import Card
from memory_core.models.columns import utcnow
from memory_core.serve.changes import prune
from memory_core.serve.retrieval import retrieve
from memory_core.serve.snapshot_cache import LOAD_SHARE, SnapshotCache
from tests.helpers.serve import add_card


def _served(cache: SnapshotCache, namespace: str, state: dict) -> set[str]:
    snap = cache.get(namespace)
    found = retrieve(snapshot=snap, state=state, now=utcnow(), top_k=50).matches
    return {m.entry.scenario for m in found}


def _edit(engine, card_id, **fields) -> None:
    """A change made by another process (the nightly run, the CLI): straight to the database."""
    with session_scope(engine) as s:
        card = s.get(Card, card_id)
        assert card is not None
        for k, v in fields.items():
            setattr(card, k, v)
        card.version += 1
        card.updated_at = utcnow()


def test_changed_new_archived_and_superseded_cards_are_applied_not_reloaded(engine) -> None:
    a1 = add_card(engine, scenario="a1", preconditions=['tool == "search"'])
    a2 = add_card(engine, scenario="a2", preconditions=['tool == "search"', "retry_count > 1"])
    a3 = add_card(engine, scenario="a3", preconditions=['error.contains("timeout")'])
    add_card(engine, namespace="team-b", scenario="b1", preconditions=['tool == "search"'])
    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    search = {"tool": "search", "retry_count": 2, "error": "read timeout"}
    fetch = {"tool": "fetch", "retry_count": 0}
    assert _served(cache, "team-a", search) == {"a1", "a2", "a3"}
    assert _served(cache, "team-b", search) == {"b1"}
    first_a, first_b = cache.get("team-a"), cache.get("team-b")

    _edit(engine, a1.card_id, preconditions=['tool in ["fetch", "get"]'])  # changed
    a4 = add_card(engine, scenario="a4", preconditions=['tool == "search" || tool == "fetch"'])
    _edit(engine, a2.card_id, status="archived")  # archived
    a5 = add_card(engine, scenario="a5", preconditions=['error.contains("timeout")'])
    _edit(engine, a3.card_id, status="superseded", superseded_by=a5.card_id)

    assert _served(cache, "team-a", search) == {"a4", "a5"}
    assert _served(cache, "team-a", fetch) == {"a1", "a4"}
    snap = cache.get("team-a")
    assert snap is first_a and cache.reloads == 0  # applied card by card
    assert set(snap.entries) == {a1.card_id, a4.card_id, a5.card_id}
    assert cache.applied == 5
    # the other namespace read only its own feed: nothing changed there
    assert cache.get("team-b") is first_b and len(first_b.entries) == 1
    assert _served(cache, "team-b", search) == {"b1"}
    # the served set agrees with the database's fingerprint (what the periodic check compares)
    from memory_core.serve.changes import fingerprint

    with Session(engine) as s:
        assert snap.local_fingerprint() == fingerprint(s, "team-a")
    assert a4.card_id in snap.entries


def test_changes_wait_for_the_refresh_interval_unless_written_here(engine) -> None:
    a1 = add_card(engine, scenario="a1", preconditions=['tool == "search"'])
    cache = SnapshotCache(engine=engine, refresh_s=3600.0)
    assert _served(cache, "team-a", {"tool": "search"}) == {"a1"}
    _edit(engine, a1.card_id, status="archived")
    assert _served(cache, "team-a", {"tool": "search"}) == {"a1"}  # within the interval
    cache.invalidate(["team-a"])  # a write through this process: read the feed first
    assert _served(cache, "team-a", {"tool": "search"}) == set()


def test_a_feed_pruned_past_the_snapshot_reloads_it(engine) -> None:
    cards = [add_card(engine, scenario=f"c{i}", preconditions=['tool == "x"']) for i in range(3)]
    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    first = cache.get("team-a")
    for c in cards:
        _edit(engine, c.card_id, confidence=0.9)
    for c in cards:
        _edit(engine, c.card_id, confidence=0.8)
    assert prune(engine, keep=1) > 0  # the changes the snapshot has not read are gone
    cache.get("team-a")
    deadline = time.monotonic() + 10
    while cache.get("team-a") is first and time.monotonic() < deadline:
        time.sleep(0.02)
    snap = cache.get("team-a")
    assert snap is not first and cache.reloads == 1
    assert {e.confidence for e in snap.entries.values()} == {0.8}


def test_a_change_the_feed_missed_is_found_by_the_fingerprint_check(engine) -> None:
    from sqlalchemy import text

    a1 = add_card(engine, scenario="a1", preconditions=['tool == "search"'])
    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    first = cache.get("team-a")
    with engine.begin() as conn:  # a writer the feed does not see (its trigger is gone)
        if engine.dialect.name == "sqlite":  # a file of this test's own
            conn.execute(text("DROP TRIGGER card_change_update"))
        else:
            conn.execute(text("ALTER TABLE card DISABLE TRIGGER card_change_update"))
    try:
        _edit(engine, a1.card_id, status="archived")
    finally:  # PostgreSQL's database serves the whole session: the tests after need the feed
        if engine.dialect.name != "sqlite":
            with engine.begin() as conn:
                conn.execute(text("ALTER TABLE card ENABLE TRIGGER card_change_update"))
    assert _served(cache, "team-a", {"tool": "search"}) == {"a1"}  # the feed said nothing
    time.sleep(first.load_s / LOAD_SHARE)  # reloads are spaced by their own cost
    cache._verify("team-a")  # what runs in the background every VERIFY_S
    assert cache.reloads == 1 and cache.get("team-a") is not first
    assert _served(cache, "team-a", {"tool": "search"}) == set()


def test_cards_of_one_precondition_text_share_it_and_change_alone(engine) -> None:
    """Cards holding the same text share one compiled precondition (a million cards hold a
    few hundred thousand texts); a change of one card's preconditions leaves the other's."""
    same = ['tool == "search"', "retry_count > 1"]
    c1 = add_card(engine, scenario="c1", preconditions=same)
    c2 = add_card(engine, scenario="c2", preconditions=list(same))
    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    snap = cache.get("team-a")
    e1, e2 = snap.entries[c1.card_id], snap.entries[c2.card_id]
    assert all(a is b for a, b in zip(e1.compiled, e2.compiled, strict=True))
    assert e1.text.startswith("c1 ") and e1.scenario == "c1"
    shared = e2.compiled

    _edit(engine, c1.card_id, preconditions=['tool == "fetch"'])
    assert _served(cache, "team-a", {"tool": "search", "retry_count": 2}) == {"c2"}
    assert _served(cache, "team-a", {"tool": "fetch"}) == {"c1"}
    assert snap.entries[c2.card_id].compiled is shared
    assert [c.source for c in shared] == ['tool == "search"', "retry_count > 1"]
    assert [c.source for c in snap.entries[c1.card_id].compiled] == ['tool == "fetch"']


def test_the_need_counts_follow_changes_as_a_fresh_load_counts_them(engine) -> None:
    from memory_core.serve.snapshot import load_snapshot

    cards = [add_card(engine, scenario=f"c{i}", preconditions=['tool == "x"']) for i in range(6)]
    add_card(engine, scenario="y", preconditions=['tool == "y"'])
    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    cache.get("team-a")
    for c in cards[:4]:
        _edit(engine, c.card_id, status="archived")
    _edit(engine, cards[4].card_id, preconditions=['tool == "y"'])
    snap = cache.get("team-a")
    assert cache.reloads == 0 and len(snap.entries) == 3
    fresh = load_snapshot(engine=engine, namespace="team-a")
    assert +snap.stats.atoms == +fresh.stats.atoms  # what choosing a need weighs
