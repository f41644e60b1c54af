"""Claiming pending trajectories with a lease (FOR UPDATE SKIP LOCKED on PostgreSQL)."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col

from memory_core.db import session_scope
from memory_core.heartbeat import Liveness, stale
from memory_core.leases import release_dead_claims
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory, TrajectoryStatus

T = Trajectory


def worker_id() -> str:
    """An id for this worker process, unique across hosts and restarts."""
    return f"{socket.gethostname()[:24]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _claimable(now: datetime, stale_after: timedelta) -> ColumnElement[bool]:
    return or_(
        col(T.status) == TrajectoryStatus.pending.value,
        and_(
            col(T.status) == TrajectoryStatus.processing.value,
            or_(col(T.lease_until) < now, stale(now, stale_after)),
        ),  # its worker died, or stopped beating
    )


def claim_batch(
    *,
    engine: Engine,
    worker: str,
    batch_size: int,
    lease: timedelta,
    namespace: str | None = None,
    liveness: Liveness = Liveness(),
) -> list[Trajectory]:
    """Lease up to batch_size pending (or abandoned) trajectories to this worker; claims of a
    worker whose process is gone (this host) or whose heartbeat stopped are given back first,
    not left to expire. The holder keeps them by beating (memory_core.heartbeat)."""
    release_dead_claims(engine=engine, namespace=namespace, stale_after=liveness.stale_after)
    now = utcnow()
    with session_scope(engine) as session:
        pick = select(col(T.id)).where(_claimable(now, liveness.stale_after))
        if namespace is not None:
            pick = pick.where(col(T.namespace) == namespace)
        pick = pick.order_by(col(T.created_at), col(T.id)).limit(batch_size)
        ids = list(session.execute(pick.with_for_update(skip_locked=True)).scalars())
        if not ids:
            return []
        session.execute(
            update(T)
            .where(col(T.id).in_(ids), _claimable(now, liveness.stale_after))
            .values(
                status=TrajectoryStatus.processing.value,
                lease_owner=worker,
                lease_until=now + lease,
                lease_heartbeat=now,
                attempts=col(T.attempts) + 1,
            )
        )
        rows = (
            session.execute(
                select(T)
                .where(
                    col(T.id).in_(ids),
                    col(T.lease_owner) == worker,
                    col(T.status) == TrajectoryStatus.processing.value,
                )
                .order_by(col(T.created_at), col(T.id))
            )
            .scalars()
            .all()
        )
        return list(rows)


def release(*, engine: Engine, worker: str) -> int:
    """Give this worker's unfinished claims back to the pool (after an aborted batch)."""
    with session_scope(engine) as session:
        result = session.execute(
            update(T)
            .where(
                col(T.lease_owner) == worker,
                col(T.status) == TrajectoryStatus.processing.value,
            )
            .values(
                status=TrajectoryStatus.pending.value,
                lease_owner=None,
                lease_until=None,
                lease_heartbeat=None,
            )
        )
        return int(result.rowcount)  # type: ignore[attr-defined]
