"""A warm plain query is answered on the caller's thread (memory_core/serve/inline.py) only
while that is known to be quick and current; otherwise `query_json_now` declines and does
nothing, and the worker thread's `query_json` answers."""

from __future__ import annotations

import json

from memory_core.serve.keys import Principal
from memory_core.serve.schemas import CardIn, QueryRequest
from memory_core.serve.service import MemoryService
from tests.helpers.serve import add_card, keys_for

STATE = {"tool": "search", "retry_count": 2}


def _service(settings, engine) -> tuple[MemoryService, Principal]:
    svc = MemoryService(engine=engine, settings=settings)
    for i in range(3):
        add_card(engine, scenario=f"card {i}", preconditions=['tool == "search"'])
    who = svc.authenticate(keys_for(engine)["write"])
    return svc, who


def _warm_up(svc: MemoryService, who: Principal) -> int:
    """Plain queries on the worker-thread path until the namespace is warm; how many it took
    (the first reads the served rows from the database: slower than the budget)."""
    for n in range(1, 4 * svc.inline.streak):
        svc.query_json(principal=who, request=QueryRequest(task_state=STATE))
        if svc.inline.warm(who.namespace) is not None:
            return n
    return 0


def _ids(answer: bytes) -> list[str]:
    return [h["card"]["card_id"] for h in json.loads(answer).get("cards", [])]


def test_a_warm_quick_namespace_is_answered_inline_as_the_thread_would(settings, engine) -> None:
    svc, who = _service(settings, engine)
    plain = QueryRequest(task_state=STATE)
    assert svc.query_json_now(principal=who, request=plain) is None  # no streak yet
    warmed = _warm_up(svc, who)
    assert svc.inline.streak <= warmed < 4 * svc.inline.streak
    inline = svc.query_json_now(principal=who, request=plain)
    assert inline is not None
    threaded = svc.query_json(principal=who, request=plain)
    assert _ids(inline) == _ids(threaded) and len(_ids(inline)) == 3
    body = json.loads(inline)
    assert body["query_id"] and all(h["use_id"] for h in body["cards"])
    assert body.keys() == json.loads(threaded).keys()
    svc.uses.flush()
    used = svc.snapshots.get("team-a").entries
    assert {e.use_count for e in used.values()} == {warmed + 2}  # the inline use counted too
    # explain and prompts always take the worker thread
    for extra in ({"explain": True}, {"prompt_tokens": 200}):
        asked = QueryRequest(task_state=STATE, **extra)
        assert svc.query_json_now(principal=who, request=asked) is None


def test_a_write_a_due_feed_read_or_a_missing_row_sends_the_query_to_the_thread(
    settings, engine
) -> None:
    svc, who = _service(settings, engine)
    plain = QueryRequest(task_state=STATE)
    _warm_up(svc, who)
    assert svc.query_json_now(principal=who, request=plain) is not None

    # a write through this process is applied on the writer's thread before it answers (read
    # your writes): the namespace stays warm, its queries stay on the caller's thread
    card = CardIn(
        scenario="stored now",
        preconditions=['tool == "search"'],
        action_sequence=[{"tool": "search", "params_template": {}, "note": "n"}],
        confidence=0.9,
    )
    admin = svc.authenticate(keys_for(engine, namespace="team-a")["admin"])
    stored = svc.store_card(principal=admin, card=card)  # an admin's card is active at once
    assert stored.status == "active"
    assert svc.inline.warm(who.namespace) is not None
    assert str(stored.card_id) in _ids(svc.query_json(principal=who, request=plain))
    _warm_up(svc, who)  # (that query read the new card's row: slower than the budget)
    assert str(stored.card_id) in _ids(svc.query_json_now(principal=who, request=plain) or b"{}")

    # the feed is due: no database read on the caller's thread
    snap = svc.snapshots.get("team-a")
    snap.checked_at -= settings.serve.snapshot_refresh_s
    assert svc.query_json_now(principal=who, request=plain) is None
    svc.query_json(principal=who, request=plain)  # reads the feed
    assert svc.query_json_now(principal=who, request=plain) is not None

    # a served row not in memory: declined before any use is recorded
    svc.uses.flush()
    snap.rows.clear()
    assert svc.query_json_now(principal=who, request=plain) is None
    assert svc.uses.flush() == 0


def test_slow_queries_or_a_new_snapshot_send_the_namespace_to_threads(settings, engine) -> None:
    svc, who = _service(settings, engine)
    plain = QueryRequest(task_state=STATE)
    _warm_up(svc, who)
    snap = svc.snapshots.get("team-a")
    assert svc.inline.warm("team-a") is snap
    for _ in range(svc.inline.streak):  # the average settles at a quick query's cost
        svc.query_json(principal=who, request=plain)
    svc.inline.saw("team-a", snap, 2 * svc.inline.budget_s)
    assert svc.inline.warm("team-a") is snap  # one outlier among quick queries: still inline
    for _ in range(svc.inline.streak):
        svc.query_json(principal=who, request=plain)
    svc.inline.saw("team-a", snap, 0.05)  # a full collection's 50 ms: one query, still inline
    assert svc.inline.warm("team-a") is snap
    for _ in range(3):  # the namespace turned slow: worker threads within a few queries
        svc.inline.saw("team-a", snap, 4 * svc.inline.budget_s)
    assert svc.inline.warm("team-a") is None
    assert svc.query_json_now(principal=who, request=plain) is None
    assert 1 <= _warm_up(svc, who) < svc.inline.streak  # quick again: back within a few
    assert svc.inline.warm("team-a") is snap
    # a reloaded snapshot starts its own streak
    other = svc.snapshots.get("team-b")
    svc.inline.saw("team-a", other, 0.0)
    assert svc.inline.warm("team-a") is None


def test_a_zero_budget_never_answers_inline(settings, engine) -> None:
    settings.serve.inline_budget_ms = 0
    svc, who = _service(settings, engine)
    assert _warm_up(svc, who) == 0
    assert svc.query_json_now(principal=who, request=QueryRequest(task_state=STATE)) is None
    assert _ids(svc.query_json(principal=who, request=QueryRequest(task_state=STATE)))


def test_inline_queries_keep_their_namespace_from_eviction(settings, engine) -> None:
    # room for two namespaces of three cards: loading a third drops the least recently used
    settings = settings.model_copy(
        update={"serve": settings.serve.model_copy(update={"max_cached_cards": 6})}
    )
    svc, who = _service(settings, engine)
    for ns in ("team-b", "team-c"):
        for i in range(3):
            add_card(engine, namespace=ns, scenario=f"{ns} {i}", preconditions=['tool == "s"'])
    other = {
        ns: svc.authenticate(keys_for(engine, namespace=ns)["read"]) for ns in ("team-b", "team-c")
    }
    _warm_up(svc, who)  # team-a, through get()
    svc.query_json(principal=other["team-b"], request=QueryRequest(task_state=STATE))
    # team-a is now queried inline only: that must count as its latest use
    assert svc.query_json_now(principal=who, request=QueryRequest(task_state=STATE)) is not None
    svc.query_json(principal=other["team-c"], request=QueryRequest(task_state=STATE))
    assert svc.snapshots.ready("team-a") and not svc.snapshots.ready("team-b")
