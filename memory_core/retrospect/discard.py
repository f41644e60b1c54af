"""Discarding dead letters: an operator gives up on a parked run, with a reason that stays.

A discarded run is not deleted: its parked parts leave the dead-letter list (a parked
retrospection's status becomes `discarded`, a parked facts part is taken out of `extra`) and
`extra["discarded"]` keeps, per discard, who, when, why and the errors the parts had, so the
run, its error and the decision can still be read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.db import session_scope
from memory_core.errors import InvalidInput
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory, TrajectoryStatus
from memory_core.retrospect.dead_letters import (
    FACTS_DEAD_LETTER,
    _facts_parked,
    _matching,
    _retro_parked,
    dead_parts,
)

T = Trajectory
DISCARDED = "discarded"  # the key of `trajectory.extra` holding the list of discards
MAX_REASON = 500


@dataclass(frozen=True)
class Discard:
    """One discarded run: which, who gave up on it, when, why, and the errors it had."""

    trajectory_id: Any
    key: str
    by: str
    at: str
    reason: str
    errors: list[str]


def discard(
    *,
    engine: Engine,
    ids: Sequence[str] | None,
    namespace: str | None,
    reason: str,
    actor: str,
    now: datetime | None = None,
) -> int:
    """Discard dead letters (by id or key; None: all of the namespace, or of every namespace
    when it is None) with a reason kept in each run's record; returns how many runs. A run no
    longer parked is left alone, so a second discard of the same runs changes nothing."""
    why = (reason or "").strip()
    if not why:
        raise InvalidInput("a reason is needed to discard a dead letter", field="reason")
    if len(why) > MAX_REASON:
        raise InvalidInput(f"the reason is longer than {MAX_REASON} characters", field="reason")
    at = (now or utcnow()).isoformat(timespec="seconds")
    q = select(T).where(or_(_retro_parked(None), _facts_parked(None)))
    with session_scope(engine) as session:
        rows = list(session.execute(_matching(q, namespace, ids)).scalars())
        for row in rows:
            parts = dead_parts(row)
            extra = {k: v for k, v in (row.extra or {}).items() if k != FACTS_DEAD_LETTER}
            record = {
                "reason": why,
                "by": actor[:200],
                "at": at,
                "parts": [{"part": p.part, "error": p.error[:2000], "run": p.run} for p in parts],
            }
            extra[DISCARDED] = [*extra.get(DISCARDED, []), record]
            row.extra = extra  # a new dict: the JSON column sees the change
            if row.status == TrajectoryStatus.dead_letter.value:
                row.status = TrajectoryStatus.discarded.value
                row.lease_owner, row.lease_until = None, None
            session.add(row)
        return len(rows)


def list_discarded(*, engine: Engine, namespace: str, limit: int = 50) -> list[Discard]:
    """The latest discards of a namespace, newest first."""
    q = (
        select(T)
        .where(col(T.namespace) == namespace, col(T.extra)[DISCARDED].as_string().is_not(None))
        .order_by(col(T.created_at).desc())
        .limit(limit)
    )
    with Session(engine) as session:
        rows = list(session.execute(q).scalars())
    out = []
    for r in rows:
        for d in reversed((r.extra or {}).get(DISCARDED) or []):
            out.append(
                Discard(
                    trajectory_id=r.id,
                    key=r.key,
                    by=str(d.get("by", "")),
                    at=str(d.get("at", "")),
                    reason=str(d.get("reason", "")),
                    errors=[f"{p.get('part')}: {p.get('error')}" for p in d.get("parts", [])],
                )
            )
    return sorted(out, key=lambda d: d.at, reverse=True)[:limit]
