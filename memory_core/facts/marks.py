"""Which runs the facts stage has done or parked: markers in `trajectory.extra`, set in one
statement per batch and read by the next run (so a second run finds nothing to do)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.db import session_scope
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect.dead_letters import FACTS_DEAD_LETTER

MARKER = "facts_extracted"


def pending(
    session: Session,
    namespace: str | None,
    limit: int,
    after: tuple[datetime, uuid.UUID] | None = None,
) -> list[Trajectory]:
    """Runs not yet fact-extracted nor parked, oldest first, past `after`."""
    extra = col(Trajectory.extra)
    q = select(Trajectory).where(
        extra[MARKER].as_string().is_(None),
        extra["summary"].as_string().is_(None),  # a run kept as a summary has no text to read
        extra[FACTS_DEAD_LETTER].as_string().is_(None),  # parked: waits for a re-drive
    )
    if namespace is not None:
        q = q.where(col(Trajectory.namespace) == namespace)
    if after is not None:  # past the rows this run already saw (some stay unmarked)
        at, rid = after
        q = q.where(
            or_(
                col(Trajectory.created_at) > at,
                and_(col(Trajectory.created_at) == at, col(Trajectory.id) > rid),
            )
        )
    q = q.order_by(col(Trajectory.created_at), col(Trajectory.id)).limit(limit)
    return list(session.execute(q).scalars())


def with_key(dialect: str, key: str, marker: dict[str, Any]) -> Any:
    """`extra` with `key` set to `marker`, as an SQL expression (no other key changes)."""
    extra = col(Trajectory.extra)
    if dialect == "postgresql":
        return extra.op("||")(bindparam("marker", {key: marker}, type_=JSONB))
    return func.json_set(extra, f"$.{key}", func.json(json.dumps(marker)))


def mark(
    engine: Engine, ids: Sequence[uuid.UUID], marker: dict[str, Any], key: str = MARKER
) -> None:
    """One UPDATE for the batch; only that key of `extra` changes."""
    with session_scope(engine) as session:
        session.execute(
            update(Trajectory)
            .where(col(Trajectory.id).in_(list(ids)))
            .values(extra=with_key(engine.dialect.name, key, marker))
            .execution_options(synchronize_session=False)
        )


def park(engine: Engine, parked: dict[uuid.UUID, str], run_id: str | None) -> None:
    """Park the LLM part of these runs as dead letters, each with its error and this run."""
    at = utcnow().isoformat()
    for rid, error in parked.items():
        mark(engine, [rid], {"error": error[:2000], "run": run_id, "at": at}, FACTS_DEAD_LETTER)


def reject(
    engine: Engine, rejected: dict[uuid.UUID, tuple[str, str]], run_id: str | None, *, part: str
) -> int:
    """Keep each run's rejected answer (reason, raw answer) for debugging: a rejection, not a
    dead letter, so nothing waits for a re-drive. How many were rejected the same way before."""
    from memory_core.retrospect.rejections import keep_rejections

    with session_scope(engine) as session:
        return keep_rejections(session, rejected, run_id, part=part)
