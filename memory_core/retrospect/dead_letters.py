"""Dead letters: trajectories whose extraction kept failing, listed and sent back to the queue."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import or_, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.db import session_scope
from memory_core.models.trajectory import Trajectory, TrajectoryStatus

T = Trajectory


def list_dead_letters(
    *,
    engine: Engine,
    namespace: str | None = None,
    limit: int = 1000,
    run_id: str | None = None,
) -> list[Trajectory]:
    """Dead-lettered trajectories (all, or those one flow run parked), oldest first."""
    q = select(T).where(col(T.status) == TrajectoryStatus.dead_letter.value)
    if run_id is not None:
        q = q.where(col(T.dead_letter_run) == run_id)
    if namespace is not None:
        q = q.where(col(T.namespace) == namespace)
    with Session(engine) as session:
        return list(session.execute(q.order_by(col(T.created_at)).limit(limit)).scalars())


def redrive(
    *,
    engine: Engine,
    ids: Sequence[str] | None,
    namespace: str | None = None,
    run_id: str | None = None,
) -> int:
    """Send dead letters (by id or key; None: all; or those one flow run parked) back to
    pending; returns how many."""
    stmt = update(T).where(col(T.status) == TrajectoryStatus.dead_letter.value)
    if run_id is not None:
        stmt = stmt.where(col(T.dead_letter_run) == run_id)
    if namespace is not None:
        stmt = stmt.where(col(T.namespace) == namespace)
    if ids is not None:
        uuids = []
        for i in ids:
            try:
                uuids.append(uuid.UUID(i))
            except ValueError:
                continue  # not a UUID: it is matched as a key below
        stmt = stmt.where(or_(col(T.id).in_(uuids), col(T.key).in_(list(ids))))
    with session_scope(engine) as session:
        result = session.execute(
            stmt.values(
                status=TrajectoryStatus.pending.value,
                lease_owner=None,
                lease_until=None,
                dead_letter_run=None,
            )
        )
        return int(result.rowcount)  # type: ignore[attr-defined]
