"""Counts of trajectories and cards by status: what `hindsight status` and progress bars show."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from memory_core.models.card import Card
from memory_core.models.trajectory import Trajectory


def trajectory_counts(*, engine: Engine, namespace: str | None = None) -> dict[str, int]:
    """Trajectories per status (all namespaces when namespace is None)."""
    q = select(Trajectory.status, func.count()).group_by(Trajectory.status)
    if namespace is not None:
        q = q.where(Trajectory.namespace == namespace)
    with Session(engine) as session:
        return {str(s): int(n) for s, n in session.execute(q).all()}


def card_counts(*, engine: Engine, namespace: str | None = None) -> dict[str, int]:
    """Cards per status."""
    q = select(Card.status, func.count()).group_by(Card.status)
    if namespace is not None:
        q = q.where(Card.namespace == namespace)
    with Session(engine) as session:
        return {str(s): int(n) for s, n in session.execute(q).all()}
