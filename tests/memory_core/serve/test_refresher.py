"""The inline namespaces' feed reads happen in the refresher thread as they fall due
(memory_core/serve/refresher.py): warm queries stay on the caller's thread across intervals,
and a card written by another process is still served within the interval."""

from __future__ import annotations

import json

from memory_core.serve.schemas import QueryRequest
from memory_core.serve.service import MemoryService
from tests.helpers.serve import add_card, keys_for

STATE = {"tool": "search", "retry_count": 2}


def _ids(answer: bytes | None) -> set[str]:
    return {h["card"]["card_id"] for h in json.loads(answer or b"{}").get("cards", [])}


def _warm_up(svc: MemoryService, who, plain: QueryRequest) -> None:
    for _ in range(4 * svc.inline.streak):
        svc.query_json(principal=who, request=plain)
        if svc.inline.warm(who.namespace) is not None:
            return


def test_feed_reads_fall_to_the_refresher_and_queries_stay_inline(settings, engine) -> None:
    settings.serve.snapshot_refresh_s = 0.5
    settings.serve.inline_budget_ms = 1000  # the gate judged by freshness alone here
    for i in range(3):
        add_card(engine, scenario=f"card {i}", preconditions=['tool == "search"'])
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(keys_for(engine)["read"])
    plain = QueryRequest(task_state=STATE, record_use=False)
    _warm_up(svc, who, plain)
    snap = svc.snapshots.get(who.namespace)
    snap.checked_at -= settings.serve.snapshot_refresh_s  # due now
    assert svc.query_json_now(principal=who, request=plain) is None  # no refresher: the thread
    # another process writes a card; the refresher reads the feed, the caller never does
    new = add_card(engine, scenario="written elsewhere", preconditions=['tool == "search"'])
    read = svc.refresher.refresh_due()
    assert svc.refresher.reads == 1 and 0 < read <= settings.serve.snapshot_refresh_s
    assert new.card_id in snap.entries and svc.inline.warm(who.namespace) is snap
    assert str(new.card_id) in _ids(svc.query_json(principal=who, request=plain))
    # while a read is under way (in the refresher), queries stay inline
    snap.checked_at -= settings.serve.snapshot_refresh_s
    svc.inline.refreshing.add(who.namespace)
    assert svc.inline.warm(who.namespace) is snap
    snap.checked_at -= settings.serve.snapshot_refresh_s  # two intervals: no longer
    assert svc.inline.warm(who.namespace) is None
    svc.inline.refreshing.discard(who.namespace)
    # started with the service, the thread keeps the namespace inline on its own
    _warm_up(svc, who, plain)
    svc.start()
    try:
        import time

        for _ in range(3):
            time.sleep(settings.serve.snapshot_refresh_s)
            assert svc.query_json_now(principal=who, request=plain) is not None
        assert svc.refresher.reads >= 3
    finally:
        svc.close()
