"""One read of the change feed serves every namespace: queries spread over many namespaces
read the feed once per refresh interval, not once per namespace; a namespace with no change
reads nothing; a change made while a namespace loads is still applied to it."""

from __future__ import annotations

import threading
import time

from sqlalchemy import event

from memory_core.serve.snapshot import load_snapshot
from memory_core.serve.snapshot_cache import SnapshotCache
from tests.helpers.serve import add_card, sqlite_moved_away
from tests.memory_core.serve.test_serve_snapshot import _edit, _served


class _Reads:
    """SELECTs run on the engine, by the table they read."""

    def __init__(self, engine) -> None:
        self.feed = 0
        self.cards = 0
        self._lock = threading.Lock()
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn, cursor, statement, params, context, many) -> None:
        s = " ".join(statement.lower().split())
        with self._lock:
            if (
                s.startswith("select")
                and "from card_change" in s
                and "max(" not in s
                and "min(" not in s
            ):
                self.feed += 1
            elif s.startswith("select") and "from card " in s + " " and "card.card_id in" in s:
                self.cards += 1


def test_one_feed_read_serves_every_namespace(engine) -> None:
    names = [f"ns-{i}" for i in range(12)]
    cards = {
        ns: add_card(engine, namespace=ns, scenario=ns, preconditions=['tool == "t"'])
        for ns in names
    }
    cache = SnapshotCache(engine=engine, refresh_s=0.3)
    for ns in names:
        assert _served(cache, ns, {"tool": "t"}) == {ns}
    _edit(engine, cards["ns-3"].card_id, status="archived")
    reads = _Reads(engine)
    time.sleep(0.35)  # every namespace is due now
    for ns in names:
        expected = set() if ns == "ns-3" else {ns}
        assert _served(cache, ns, {"tool": "t"}) == expected
    assert reads.feed == 1  # one read for twelve namespaces (it was twelve)
    assert reads.cards == 1  # only the namespace that changed read its cards
    assert cache.reloads == 0 and cache.applied == 1


def test_a_change_made_while_a_namespace_loads_is_applied(engine) -> None:
    card = add_card(engine, namespace="slow", scenario="before", preconditions=['tool == "t"'])
    add_card(engine, namespace="other", scenario="o", preconditions=['tool == "t"'])
    cache: SnapshotCache

    def loader(*, engine, namespace):
        snap = load_snapshot(engine=engine, namespace=namespace)
        if namespace == "slow":  # its cards are read; a change lands and another query reads it
            _edit(engine, card.card_id, scenario="after")
            other = threading.Thread(target=lambda: cache.get("other"))
            other.start()
            other.join()
        return snap

    cache = SnapshotCache(engine=engine, refresh_s=0.0, loader=loader)
    cache.get("other")
    assert _served(cache, "slow", {"tool": "t"}) == {"before"}  # as it was read
    assert _served(cache, "slow", {"tool": "t"}) == {"after"}  # the change was kept for it
    assert cache.reloads == 0


def test_a_write_here_is_read_back_even_after_another_namespace_read_the_feed(engine) -> None:
    a = add_card(engine, namespace="a", scenario="a", preconditions=['tool == "t"'])
    add_card(engine, namespace="b", scenario="b", preconditions=['tool == "t"'])
    cache = SnapshotCache(engine=engine, refresh_s=3600.0)
    assert _served(cache, "a", {"tool": "t"}) == {"a"}
    assert _served(cache, "b", {"tool": "t"}) == {"b"}
    _edit(engine, a.card_id, status="archived")
    cache.invalidate(["a"])
    assert _served(cache, "b", {"tool": "t"}) == {"b"}
    assert _served(cache, "a", {"tool": "t"}) == set()


def test_a_write_here_is_applied_before_the_writer_answers(engine) -> None:
    """No query needs to read the feed for it: the snapshot is current, not stale."""
    a = add_card(engine, namespace="a", scenario="a", preconditions=['tool == "t"'])
    b = add_card(engine, namespace="a", scenario="b", preconditions=['tool == "t"'])
    cache = SnapshotCache(engine=engine, refresh_s=3600.0)
    assert _served(cache, "a", {"tool": "t"}) == {"a", "b"}
    _edit(engine, a.card_id, status="archived")  # written elsewhere: not seen before a feed read
    assert _served(cache, "a", {"tool": "t"}) == {"a", "b"}
    _edit(engine, b.card_id, status="archived")
    cache.written(["a"])
    assert not cache._snapshots["a"].stale
    assert _served(cache, "a", {"tool": "t"}) == set()
    assert cache.reloads == 0


def test_a_database_outage_serves_what_is_held_and_catches_up_after(engine, tmp_path) -> None:
    import pytest

    if engine.dialect.name != "sqlite":
        pytest.skip("the outage is made by moving the SQLite file away")
    a = add_card(engine, namespace="a", scenario="a", preconditions=['tool == "t"'])
    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    assert _served(cache, "a", {"tool": "t"}) == {"a"}
    _edit(engine, a.card_id, status="archived")
    with sqlite_moved_away(engine, tmp_path):
        assert _served(cache, "a", {"tool": "t"}) == {"a"}  # served as held, no error
        assert _served(cache, "a", {"tool": "t"}) == {"a"}
    assert _served(cache, "a", {"tool": "t"}) == set()  # back: the change was not lost
    assert cache.reloads == 0
