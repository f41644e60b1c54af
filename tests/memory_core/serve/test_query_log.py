"""The query log: the use writer writes one row per served query beside its uses; the console's
reads page it newest first, filter it by card, key and time, redact its states, and the use
log's retention prunes it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from memory_core.db import session_scope
from memory_core.decay.use_log import prune_use_log
from memory_core.effects.runs import record_query_outcome
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.columns import row_id, utcnow
from memory_core.models.query_log import QueryLog
from memory_core.serve.keys import create_key
from memory_core.serve.query_log import QueryFilter, namespace_keys, parse_time, query_page
from memory_core.serve.uses import UseRecorder
from tests.helpers.serve import add_card

SECRET = "sk-live-abcdefghijklmnopqrstuvwx0123"


def _logged(engine) -> int:
    with Session(engine) as s:
        return s.execute(select(func.count()).select_from(QueryLog)).scalar_one()


def test_one_row_per_query_read_back_with_scores_key_outcome_and_pages(engine) -> None:
    a, b, c = (add_card(engine, scenario=f"card {i}").card_id for i in range(3))
    other = add_card(engine, namespace="team-b", scenario="theirs").card_id
    agent, _ = create_key(engine=engine, namespace="team-a", scopes=["read"], name="planner")
    rec = UseRecorder(engine=engine)
    t0 = utcnow() - timedelta(hours=1)
    first = row_id()
    state = {"tool": "search", "token": SECRET}
    rec.record(
        namespace="team-a",
        card_ids=[b, a],
        withheld=[c],
        state=state,
        now=t0,
        query_id=first,
        asked=(agent.id, 3.25, {a: 0.5, b: 0.75, c: 0.625}),
    )
    # 60 more queries of card a, a minute apart; one of another namespace; one without a log row
    ids = [row_id() for _ in range(60)]
    for i, q in enumerate(ids):
        rec.record(
            namespace="team-a",
            card_ids=[a],
            state={"n": i},
            now=t0 + timedelta(minutes=i + 1),
            query_id=q,
            asked=(None, 1.0, {a: 0.1}),
        )
    rec.record(namespace="team-b", card_ids=[other], now=t0, query_id=row_id(), asked=(None, 1, {}))
    rec.record(namespace="team-a", card_ids=[a], now=t0)  # no query: no row
    rec.flush()
    assert _logged(engine) == 62

    record_query_outcome(engine=engine, namespace="team-a", query_id=first, outcome="success")
    every = query_page(engine=engine, namespace="team-a", filters=QueryFilter(card_id=c))
    assert [q.query_id for q in every.queries] == [first] and every.next_cursor is None
    q = every.queries[0]
    assert [(s.card_id, s.score, s.scenario) for s in q.served] == [
        (b, 0.75, "card 1"),
        (a, 0.5, "card 0"),
    ]
    assert [(s.card_id, s.score) for s in q.withheld] == [(c, 0.625)]
    assert (q.key_id, q.key_name, q.latency_ms, q.outcome, q.asked_at) == (
        agent.id,
        "planner",
        3.25,
        "success",
        t0,
    )
    assert q.state["tool"] == "search" and SECRET not in str(q.state)  # redacted as a run is

    # keyset pages of card a's queries: every one once, newest first
    seen, after = [], None
    while True:
        page = query_page(
            engine=engine, namespace="team-a", filters=QueryFilter(card_id=a), after=after, limit=25
        )
        seen += [x.query_id for x in page.queries]
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert seen == [*reversed(ids), first]
    by_key = query_page(engine=engine, namespace="team-a", filters=QueryFilter(key_id=agent.id))
    assert [x.query_id for x in by_key.queries] == [first]
    window = QueryFilter(since=t0 + timedelta(minutes=10), until=t0 + timedelta(minutes=12))
    found = query_page(engine=engine, namespace="team-a", filters=window).queries
    assert [x.query_id for x in found] == [ids[11], ids[10], ids[9]]
    with pytest.raises(NotFound):  # another namespace's card, as on its own page
        query_page(engine=engine, namespace="team-b", filters=QueryFilter(card_id=a))
    assert [name for _, name in namespace_keys(engine=engine, namespace="team-a")] == ["planner"]


def test_bad_filters_are_refused_by_name(engine) -> None:
    with pytest.raises(InvalidInput, match="since must be an ISO date"):
        parse_time("yesterday", "since")
    assert parse_time("2026-12-07T10:00", "since").tzinfo is not None  # UTC when unnamed
    with pytest.raises(InvalidInput, match="ends before it starts"):
        QueryFilter(since=utcnow(), until=utcnow() - timedelta(days=1))
    with pytest.raises(InvalidInput, match="cursor"):
        query_page(engine=engine, namespace="team-a", filters=QueryFilter(), after="garbage")


def test_the_use_logs_retention_prunes_the_query_log(engine) -> None:
    card = add_card(engine).card_id
    now = utcnow()
    rec = UseRecorder(engine=engine)
    for days in (1, 1, 40, 40):
        rec.record(
            namespace="team-a",
            card_ids=[card],
            now=now - timedelta(days=days),
            query_id=row_id(),
            asked=(None, 1.0, {card: 0.2}),
        )
    rec.flush()
    with session_scope(engine) as s:  # one more namespace's old row: kept by a scoped prune
        s.add(QueryLog(query_id=row_id(), namespace="team-b", asked_at=now - timedelta(days=40)))
    assert _logged(engine) == 5
    assert prune_use_log(engine=engine, retention_days=30, namespace="team-a", now=now) == 2
    assert _logged(engine) == 3
    assert prune_use_log(engine=engine, retention_days=30, now=now) == 0
    assert _logged(engine) == 2
