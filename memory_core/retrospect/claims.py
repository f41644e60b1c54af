"""Claiming pending trajectories with a lease (FOR UPDATE SKIP LOCKED on PostgreSQL)."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement

from memory_core.db import session_scope
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory, TrajectoryStatus

T = Trajectory


def worker_id() -> str:
    """An id for this worker process, unique across hosts and restarts."""
    return f"{socket.gethostname()[:24]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _claimable(now: object) -> ColumnElement[bool]:
    return or_(
        T.status == TrajectoryStatus.pending.value,  # type: ignore[arg-type]
        and_(T.status == TrajectoryStatus.processing.value,  # type: ignore[arg-type]
             T.lease_until < now),  # type: ignore[operator]  # its worker died
    )


def claim_batch(
    *, engine: Engine, worker: str, batch_size: int, lease: timedelta,
    namespace: str | None = None,
) -> list[Trajectory]:
    """Lease up to batch_size pending (or abandoned) trajectories to this worker."""
    now = utcnow()
    with session_scope(engine) as session:
        pick = select(T.id).where(_claimable(now))
        if namespace is not None:
            pick = pick.where(T.namespace == namespace)
        pick = pick.order_by(T.created_at, T.id).limit(batch_size)  # type: ignore[arg-type]
        ids = list(session.execute(pick.with_for_update(skip_locked=True)).scalars())
        if not ids:
            return []
        session.execute(
            update(T)
            .where(T.id.in_(ids), _claimable(now))  # type: ignore[attr-defined]
            .values(status=TrajectoryStatus.processing.value, lease_owner=worker,
                    lease_until=now + lease, attempts=T.attempts + 1)
        )
        rows = session.execute(
            select(T).where(T.id.in_(ids), T.lease_owner == worker,  # type: ignore[attr-defined]
                            T.status == TrajectoryStatus.processing.value)
            .order_by(T.created_at, T.id)  # type: ignore[arg-type]
        ).scalars().all()
        return list(rows)


def release(*, engine: Engine, worker: str) -> int:
    """Give this worker's unfinished claims back to the pool (after an aborted batch)."""
    with session_scope(engine) as session:
        result = session.execute(
            update(T)
            .where(T.lease_owner == worker,  # type: ignore[arg-type]
                   T.status == TrajectoryStatus.processing.value)
            .values(status=TrajectoryStatus.pending.value, lease_owner=None, lease_until=None)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]
