"""Rejected LLM answers, kept on their run: well-formed but wrong by content (citing a step or
turn the model was not shown, a card for a decision point it was not given, failing a check).
Asking again gets the same answer, so a rejection is never a dead letter: the run is done,
and its marker (`extra["llm_rejected"]`: part, reason, raw answer, run, when) says why for
debugging. One marker a run: a run rejected again is still one rejection, and its marker
counts how many times the same reason came back."""

from __future__ import annotations

import uuid

from sqlalchemy import select, update
from sqlmodel import Session, col

from memory_core.facts.marks import with_key
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect.dead_letters import REJECTED

REPEAT_NOTE = "rejected the same way before: asking again does not cure it"


def keep_rejections(
    session: Session,
    rejected: dict[uuid.UUID, tuple[str, str]],
    run_id: str | None,
    *,
    part: str,
) -> int:
    """Write each run's (reason, raw answer) marker in this transaction; how many of them had
    been rejected the same way (same part, same reason) before."""
    if not rejected:
        return 0
    rows = session.execute(
        select(col(Trajectory.id), col(Trajectory.extra)).where(
            col(Trajectory.id).in_(list(rejected))
        )
    ).all()
    before = {rid: extra for rid, extra in rows}
    dialect, at, again = session.get_bind().dialect.name, utcnow().isoformat(), 0
    for rid, (reason, raw) in rejected.items():
        old = (before.get(rid) or {}).get(REJECTED) or {}
        same = old.get("part") == part and old.get("reason") == reason[:2000]
        again += same
        marker = {
            "part": part,
            "reason": reason[:2000],
            "raw": raw[:4000],
            "run": run_id,
            "at": at,
            "repeats": int(old.get("repeats", 0)) + 1 if same else 0,
        }
        session.execute(
            update(Trajectory)
            .where(col(Trajectory.id) == rid)
            .values(extra=with_key(dialect, REJECTED, marker))
            .execution_options(synchronize_session=False)
        )
    return again
