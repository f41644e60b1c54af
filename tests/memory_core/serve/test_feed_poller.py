"""The change feed read in a thread while queries come (serve/feed_poller.py): a change is
applied between queries, not by the next one; the thread stops when the cache is idle, closed
or gone, and an outage is logged once and caught up after."""

from __future__ import annotations

import gc
import logging
import time

import pytest

from memory_core.serve import feed_poller
from memory_core.serve.snapshot_cache import SnapshotCache
from tests.helpers.serve import add_card, sqlite_moved_away
from tests.memory_core.serve.test_serve_snapshot import _edit, _served


def _until(check, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_a_change_is_applied_between_queries_not_by_the_next_one(engine) -> None:
    a = add_card(engine, namespace="p", scenario="a", preconditions=['tool == "t"'])
    add_card(engine, namespace="p", scenario="b", preconditions=['tool == "t"'])
    cache = SnapshotCache(engine=engine, refresh_s=0.2, poll=True)
    try:
        assert _served(cache, "p", {"tool": "t"}) == {"a", "b"}
        snap = cache.get("p")
        _edit(engine, a.card_id, status="archived")
        # no query meanwhile: the thread reads the feed and applies the change
        # the thread counts a change after applying it: wait for the count, not the entry
        assert _until(lambda: cache.applied >= 1 and a.card_id not in snap.entries)
        applied = cache.applied
        assert _served(cache, "p", {"tool": "t"}) == {"b"}
        assert cache.applied == applied  # the query found it done
        assert cache.poller is not None and cache.poller.rounds > 0
    finally:
        cache.close()


def test_the_thread_stops_when_idle_and_when_closed(engine, monkeypatch) -> None:
    monkeypatch.setattr(feed_poller, "IDLE_S", 0.3)
    add_card(engine, namespace="p", scenario="a", preconditions=['tool == "t"'])
    cache = SnapshotCache(engine=engine, refresh_s=0.1, poll=True)
    poller = cache.poller
    assert poller is not None
    _served(cache, "p", {"tool": "t"})
    assert poller._thread is not None
    assert _until(lambda: poller._thread is None)  # idle: stopped
    a2 = add_card(engine, namespace="p", scenario="a2", preconditions=['tool == "t"'])
    time.sleep(0.15)  # past the refresh interval: the next query catches up itself
    assert _served(cache, "p", {"tool": "t"}) == {"a", "a2"}
    assert poller._thread is not None  # and started it again
    cache.close()
    assert poller._thread is None
    _served(cache, "p", {"tool": "t"})
    assert poller._thread is None  # closed stays closed
    assert a2.card_id in cache.get("p").entries


def test_a_cache_nobody_holds_takes_its_thread_with_it(engine) -> None:
    add_card(engine, namespace="p", scenario="a", preconditions=['tool == "t"'])
    cache = SnapshotCache(engine=engine, refresh_s=0.1, poll=True)
    _served(cache, "p", {"tool": "t"})
    thread = cache.poller._thread  # type: ignore[union-attr]
    assert thread is not None and thread.is_alive()
    del cache
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_an_outage_is_logged_once_and_caught_up_after(engine, tmp_path, caplog) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("the outage is made by moving the SQLite file away")
    a = add_card(engine, namespace="p", scenario="a", preconditions=['tool == "t"'])
    cache = SnapshotCache(engine=engine, refresh_s=0.1, poll=True)
    poller = cache.poller
    assert poller is not None
    try:
        assert _served(cache, "p", {"tool": "t"}) == {"a"}
        snap = cache.get("p")
        _edit(engine, a.card_id, status="archived")
        with (
            caplog.at_level(logging.WARNING, logger=feed_poller.__name__),
            sqlite_moved_away(engine, tmp_path),
        ):
            for _ in range(8):  # queries keep coming, served as held; several rounds fail
                assert _served(cache, "p", {"tool": "t"}) == {"a"}
                time.sleep(0.06)
        warned = [r for r in caplog.records if r.name == feed_poller.__name__]
        assert len(warned) == 1, [r.getMessage() for r in warned]
        assert poller._thread is not None  # still running
        _served(cache, "p", {"tool": "t"})
        assert _until(lambda: a.card_id not in snap.entries)  # caught up: nothing lost
    finally:
        cache.close()


def test_a_served_card_changed_elsewhere_is_read_again_by_the_thread(engine, settings) -> None:
    """Feedback or an edit elsewhere changes a card being served: its served row is read again
    in the feed's thread, so the next query serving it reads nothing from the database."""
    from sqlalchemy import event

    from memory_core.serve.keys import create_key
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService

    settings = settings.model_copy(
        update={"serve": settings.serve.model_copy(update={"snapshot_refresh_s": 0.2})}
    )
    a = add_card(engine, namespace="p", scenario="before", preconditions=['tool == "t"'])
    svc = MemoryService(engine=engine, settings=settings)
    try:
        who = svc.authenticate(create_key(engine=engine, namespace="p", scopes=["read"])[1])
        req = QueryRequest(task_state={"tool": "t"}, record_use=False)
        assert [h.card.scenario for h in svc.query(principal=who, request=req).cards] == ["before"]
        snap = svc.snapshots.get("p")
        _edit(engine, a.card_id, scenario="after")
        assert _until(lambda: b'"after"' in snap.rows.get(a.card_id, (b"",))[0])
        reads: list[str] = []
        listen = lambda *args: reads.append(args[2])  # noqa: E731
        event.listen(svc.engine, "before_cursor_execute", listen)
        try:
            hits = svc.query(principal=who, request=req).cards
        finally:
            event.remove(svc.engine, "before_cursor_execute", listen)
        assert [h.card.scenario for h in hits] == ["after"]
        assert not [s for s in reads if "FROM card " in s + " "], reads
    finally:
        svc.close()


def test_warm_queries_stay_inline_across_intervals(settings, engine) -> None:
    """The feed's thread keeps an inline namespace's snapshot current: warm plain queries stay
    on the caller's thread (the API's event loop) interval after interval, instead of going
    down the route to a worker thread each time a read falls due, and a card written by
    another process is still served within the interval."""
    import json

    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService
    from tests.helpers.serve import keys_for

    settings.serve.snapshot_refresh_s = 0.4
    settings.serve.inline_budget_ms = 1000  # the gate judged by freshness alone here
    for i in range(3):
        add_card(engine, scenario=f"card {i}", preconditions=['tool == "search"'])
    svc = MemoryService(engine=engine, settings=settings)
    try:
        who = svc.authenticate(keys_for(engine)["read"])
        plain = QueryRequest(task_state={"tool": "search"}, record_use=False)
        for _ in range(4 * svc.inline.streak):
            svc.query_json(principal=who, request=plain)
        assert svc.inline.warm(who.namespace) is not None
        interval = settings.serve.snapshot_refresh_s

        def inline_soon() -> bool:
            """Answered on this thread within two intervals: the feed's thread, every half
            interval, may run late on a loaded machine (CI), and a query in that gap rightly
            takes the route; without the thread no query here would ever be inline again."""
            deadline = time.monotonic() + 2 * interval
            while time.monotonic() < deadline:
                if svc.query_json_now(principal=who, request=plain) is not None:
                    return True
                time.sleep(0.02)
            return False

        for _ in range(4):  # past the interval each time: answered inline all the same
            time.sleep(interval)
            assert inline_soon()
        new = add_card(engine, scenario="written elsewhere", preconditions=['tool == "search"'])
        time.sleep(settings.serve.snapshot_refresh_s)
        # served within the interval: its row is read once, on a worker thread (not held yet)
        assert svc.query_json_now(principal=who, request=plain) is None
        answer = svc.query_json(principal=who, request=plain)
        assert str(new.card_id) in {h["card"]["card_id"] for h in json.loads(answer)["cards"]}
        assert inline_soon()
    finally:
        svc.close()
