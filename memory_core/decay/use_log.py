"""The use log stays bounded: use rows past the retention window are deleted.

Nothing counted is lost: every use already added to its card's `use_count` and
`last_used_at` when it was written, and every reported outcome to the card's success and
failure counts. What goes is the per-use detail (the task state it was served for), and the
chance to report an outcome for a use older than the window. The query log (one row per
served query) goes with its uses, by the same window.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import delete
from sqlalchemy.engine import CursorResult, Engine
from sqlmodel import col

from memory_core.db import session_scope
from memory_core.erase import zero_freed
from memory_core.models.card import CardUse
from memory_core.models.columns import utcnow
from memory_core.models.query_log import QueryLog


def prune_use_log(
    *,
    engine: Engine,
    retention_days: float,
    namespace: str | None = None,
    now: datetime | None = None,
) -> int:
    """Delete use rows and query log rows older than retention_days (0: keep all); the number
    of use rows deleted."""
    return prune_logs(engine=engine, retention_days=retention_days, namespace=namespace, now=now)[0]


def prune_logs(
    *,
    engine: Engine,
    retention_days: float,
    namespace: str | None = None,
    now: datetime | None = None,
) -> tuple[int, int]:
    """Delete use rows and query log rows older than retention_days (0: keep all), their freed
    pages zeroed on SQLite; how many uses and queries."""
    if retention_days <= 0:
        return 0, 0
    cutoff = (now or utcnow()) - timedelta(days=retention_days)
    stmt = delete(CardUse).where(col(CardUse.used_at) < cutoff)
    queries = delete(QueryLog).where(col(QueryLog.asked_at) < cutoff)
    if namespace is not None:
        stmt = stmt.where(col(CardUse.namespace) == namespace)
        queries = queries.where(col(QueryLog.namespace) == namespace)
    with session_scope(engine) as session:
        zero_freed(session.connection())
        result = session.execute(stmt.execution_options(synchronize_session=False))
        asked = session.execute(queries.execution_options(synchronize_session=False))
        return (
            int(cast(CursorResult[Any], result).rowcount or 0),
            int(cast(CursorResult[Any], asked).rowcount or 0),
        )
