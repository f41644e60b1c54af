"""The overview's pictures on both databases: uses per UTC day, the top failure modes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from memory_core.db import session_scope
from memory_core.models.card import CardUse
from memory_core.serve.pictures import top_failure_modes, uses_per_day
from tests.helpers.serve import add_card


def test_uses_are_counted_on_their_utc_day(engine) -> None:
    card = add_card(engine, namespace="team-a")
    other = add_card(engine, namespace="team-b")
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    times = {
        "team-a": [
            now,  # today
            now.replace(hour=0, minute=0, second=0),  # today's first instant
            now.replace(hour=0) - timedelta(microseconds=1),  # yesterday's last
            now - timedelta(days=13),  # the oldest day shown
            now - timedelta(days=14),  # before it
        ],
        "team-b": [now],  # another namespace
    }
    rows = [
        {"id": uuid.uuid4(), "card_id": c.card_id, "namespace": ns, "used_at": t, "context": {}}
        for ns, c in (("team-a", card), ("team-b", other))
        for t in times[ns]
    ]
    with session_scope(engine) as session:
        session.execute(insert(CardUse), rows)
    days = uses_per_day(engine=engine, namespace="team-a", now=now)
    assert len(days) == 14
    assert days[0] == ("2026-02-25", 1)
    assert days[-2:] == [("2026-03-09", 1), ("2026-03-10", 2)]
    assert sum(n for _, n in days) == 4


def test_top_failure_modes_are_the_active_experience_cards(engine) -> None:
    add_card(engine, modes=[{"mode": "rate limited", "handling": "wait"}])
    add_card(engine, modes=[{"mode": "rate limited", "handling": "wait"}], scenario="again")
    add_card(engine, modes=[{"mode": "timeout", "handling": "retry"}], status="archived")
    assert top_failure_modes(engine=engine, namespace="team-a") == [("rate limited", 2)]
