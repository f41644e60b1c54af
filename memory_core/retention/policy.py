"""Each namespace's retention policy: its own days where set, else the settings' (decay rules),
stored in the namespace_retention table with the nightly's last removal."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine
from sqlmodel import Session, select

from memory_core.db import session_scope
from memory_core.errors import InvalidInput
from memory_core.models.columns import utcnow
from memory_core.models.retention import NamespaceRetention
from memory_core.namespaces.answers import RetentionOut
from memory_core.settings import DecayRules


@dataclass(frozen=True)
class Policy:
    """Days a namespace keeps its raw runs and its uses (0: all)."""

    trajectories_days: float
    uses_days: float


def _row(session: Session, namespace: str) -> NamespaceRetention | None:
    return session.get(NamespaceRetention, namespace)


def policy_of(engine: Engine, rules: DecayRules, namespace: str) -> RetentionOut:
    """The namespace's policy: its own days where it set them, else the settings'."""
    with Session(engine) as session:
        row = _row(session, namespace)
    own_t = row.trajectories_days if row else None
    own_u = row.uses_days if row else None
    return RetentionOut(
        namespace=namespace,
        trajectories_days=own_t if own_t is not None else rules.trajectory_retention_days,
        uses_days=own_u if own_u is not None else rules.use_retention_days,
        own_trajectories_days=own_t,
        own_uses_days=own_u,
        set_by=row.set_by if row else None,
        set_at=row.set_at if row else None,
        last_run_at=row.last_run_at if row else None,
        last_removed=dict(row.last_removed) if row else {},
    )


def _days(value: float | None, name: str) -> None:
    if value is not None and value < 0:
        raise InvalidInput(f"{name} must be 0 (keep all) or more days, not {value}", field=name)


def set_policy(
    *,
    engine: Engine,
    namespace: str,
    actor: str,
    trajectories_days: float | None = None,
    uses_days: float | None = None,
    clear: bool = False,
) -> None:
    """Set the namespace's own days (those given; `clear` first returns both to the settings')."""
    if not namespace.strip():
        raise InvalidInput("the namespace is empty", field="namespace")
    _days(trajectories_days, "trajectories_days")
    _days(uses_days, "uses_days")
    with session_scope(engine) as session:
        row = _row(session, namespace) or NamespaceRetention(namespace=namespace)
        if clear:
            row.trajectories_days = row.uses_days = None
        if trajectories_days is not None:
            row.trajectories_days = trajectories_days
        if uses_days is not None:
            row.uses_days = uses_days
        row.set_by, row.set_at = actor[:128], utcnow()
        session.add(row)


def record_run(engine: Engine, namespace: str, removed: dict[str, int], at: datetime) -> None:
    """Remember what a night's retention removed from the namespace (counts only)."""
    with session_scope(engine) as session:
        row = _row(session, namespace) or NamespaceRetention(namespace=namespace)
        row.last_run_at, row.last_removed = at, dict(removed)
        session.add(row)


def runs_since(engine: Engine, since: datetime) -> list[NamespaceRetention]:
    """The namespaces whose retention ran since then, by name, with what it removed."""
    with Session(engine) as session:
        q = select(NamespaceRetention).where(
            NamespaceRetention.last_run_at >= since  # type: ignore[operator]
        )
        return sorted(session.exec(q).all(), key=lambda r: r.namespace)


def effective(out: RetentionOut) -> Policy:
    """The days applied."""
    return Policy(out.trajectories_days, out.uses_days)
