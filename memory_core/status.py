"""Counts of trajectories and cards by status: what `hindsight status` and progress bars show."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.db import read_session
from memory_core.models.card import Card
from memory_core.models.trajectory import Trajectory


def trajectory_counts(*, engine: Engine, namespace: str | None = None) -> dict[str, int]:
    """Trajectories per status (all namespaces when namespace is None)."""
    q = select(col(Trajectory.status), func.count()).group_by(col(Trajectory.status))
    if namespace is not None:
        q = q.where(col(Trajectory.namespace) == namespace)
    with read_session(engine) as session:
        return {str(s): int(n) for s, n in session.execute(q).all()}


def card_counts(*, engine: Engine, namespace: str | None = None) -> dict[str, int]:
    """Cards per status."""
    q = select(col(Card.status), func.count()).group_by(col(Card.status))
    if namespace is not None:
        q = q.where(col(Card.namespace) == namespace)
    with read_session(engine) as session:
        return {str(s): int(n) for s, n in session.execute(q).all()}
