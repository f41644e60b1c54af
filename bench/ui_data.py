"""The console bench's data beyond the seeded cards (bench/ui.py): a realistic spread of
statuses and update times, dead letters, and cards with outcomes in both holdout arms."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from memory_core.db import session_scope
from memory_core.models.card import Card
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory


def vary(engine, n: int) -> None:
    """Realistic spread: updated over the last weeks, 2% in review, 3% archived."""
    from sqlalchemy import bindparam, update

    with session_scope(engine) as session:
        ids = [
            r[0] for r in session.execute(Card.__table__.select().with_only_columns(Card.card_id))
        ]
        now = utcnow()
        params = [
            {
                "cid": cid,
                "u": now - timedelta(minutes=i * 7 % 40_000),
                "s": "review" if i % 50 == 0 else "archived" if i % 33 == 0 else "active",
            }
            for i, cid in enumerate(ids)
        ]
        stmt = (
            update(Card.__table__)
            .where(Card.__table__.c.card_id == bindparam("cid"))
            .values(updated_at=bindparam("u"), status=bindparam("s"))
        )
        session.execute(stmt, params)
        session.execute(
            insert(Trajectory),
            [
                {
                    "id": uuid.uuid4(),
                    "namespace": "bench",
                    "key": f"dead-{i}",
                    "content_hash": uuid.uuid4().hex,
                    "source_format": "steps",
                    "task_type": "task",
                    "steps": [{"index": s, "type": "message", "text": f"s{s}"} for s in range(30)],
                    "extra": {},
                    "status": "dead_letter",
                    "error": "LLM answer invalid",
                    "attempts": 3,
                    "created_at": now,
                }
                for i in range(140)  # the night: 140 parked runs, three pages
            ],
        )


def outcomes(engine: Engine, tested: int) -> None:
    """`tested` cards with outcomes in both arms (what the harms test reads on each card page
    and list): 400-599 served, 20-40 withheld, served success rates 0.3-0.7 against 0.5."""
    from sqlalchemy import bindparam, select, update

    with session_scope(engine) as session:
        ids = session.execute(select(Card.card_id).order_by(Card.card_id).limit(tested)).scalars()
        params = []
        for i, cid in enumerate(ids):
            served, withheld = 400 + i % 200, 20 + i % 21
            params.append(
                {
                    "cid": cid,
                    "so": served,
                    "ss": round(served * (0.3 + (i % 41) / 100)),
                    "wo": withheld,
                    "ws": withheld // 2,
                }
            )
        t = Card.__table__
        stmt = (
            update(t)
            .where(t.c.card_id == bindparam("cid"))
            .values(
                served_outcomes=bindparam("so"),
                served_successes=bindparam("ss"),
                withheld_outcomes=bindparam("wo"),
                withheld_successes=bindparam("ws"),
            )
        )
        if params:
            session.execute(stmt, params)


def served_queries(engine: Engine, queries: int) -> None:
    """`queries` query log rows over the last day, each serving 3 cards and withholding 1 (the
    use rows the card filter and the outcomes read); every fourth with an outcome."""
    from sqlalchemy import select

    from memory_core.models.card import CardUse
    from memory_core.models.query_log import QueryLog

    if queries <= 0:
        return
    with session_scope(engine) as session:
        ids = list(session.execute(select(Card.card_id).limit(2_000)).scalars())
        now = utcnow()
        logged, uses = [], []
        for i in range(queries):
            qid, at = uuid.uuid4(), now - timedelta(seconds=i * 86_400 / queries)
            picked = [ids[(i * 7 + k * 13) % len(ids)] for k in range(4)]
            outcome = ("success" if i % 8 else "failure") if i % 4 == 0 else None
            logged.append(
                {
                    "query_id": qid,
                    "namespace": "bench",
                    "asked_at": at,
                    "key_id": None,
                    "via": "api",
                    "state": {"tool": f"tool_{i % 40}", "retry_count": i % 3},
                    "served": [[str(c), 0.5 - k / 10] for k, c in enumerate(picked[:3])],
                    "withheld": [[str(picked[3]), 0.2]],
                    "latency_ms": 1.5,
                }
            )
            uses += [
                {
                    "id": uuid.uuid4(),
                    "card_id": c,
                    "namespace": "bench",
                    "used_at": at,
                    "outcome": outcome,
                    "context": {},
                    "arm": "served" if k < 3 else "withheld",
                    "query_id": qid,
                }
                for k, c in enumerate(picked)
            ]
        for start in range(0, len(logged), 5_000):
            session.execute(insert(QueryLog), logged[start : start + 5_000])
        for start in range(0, len(uses), 5_000):
            session.execute(insert(CardUse), uses[start : start + 5_000])
