"""Dead letters: trajectories whose extraction kept failing, listed and sent back to the queue.

A trajectory has two parts that can be parked: its retrospection (`status` = dead_letter,
`error`, `dead_letter_run`) and its facts (`extra["facts_dead_letter"]` = {error, run, at},
set by the facts stage when a run's LLM facts failed: an outage, a refusal, an answer still
invalid after the repair prompt). The facts part lives apart because a run's retrospection
may be done (or parked by another flow run) when its facts fail: sharing `status` would
re-retrospect it on a re-drive. Both are listed and re-driven here alike, and counted by
run: a run with both parts parked is one dead letter.

What a retry cannot fix is no dead letter: an answer that parses but is wrong by content
(`extra["llm_rejected"]`) is a rejection, listed here with its reason and raw answer; so is
a draft refused on its way to the store for failing its grounding or the trust screen
(`extra["drafts_rejected"]`, beside its rejected or quarantined card).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, bindparam, func, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, col

from memory_core.db import session_scope
from memory_core.models.trajectory import Trajectory, TrajectoryStatus

T = Trajectory
FACTS_DEAD_LETTER = "facts_dead_letter"  # the key of `trajectory.extra` a parked facts part holds
# the key of `trajectory.extra` holding a rejected LLM answer: well-formed but wrong by content
# ({part, reason, raw, run, at}); a retry would get the same answer, so it is never parked
REJECTED = "llm_rejected"
# the key holding the drafts of a run refused on their way to the store (failed grounding or
# the trust screen): {run, at, drafts: [{status, reason, raw, scenario, producer}]}
DRAFTS_REJECTED = "drafts_rejected"


@dataclass(frozen=True)
class DeadPart:
    """One parked part of a trajectory: "retrospect" or "facts", why, and which run parked it."""

    part: str
    error: str
    run: str | None


def _retro_parked(run_id: str | None) -> ColumnElement[bool]:
    cond = col(T.status) == TrajectoryStatus.dead_letter.value
    return cond if run_id is None else cond & (col(T.dead_letter_run) == run_id)


def _facts_parked(run_id: str | None) -> ColumnElement[bool]:
    extra = col(T.extra)
    cond: ColumnElement[bool]
    if run_id is None:
        cond = extra[FACTS_DEAD_LETTER].as_string().is_not(None)
    else:
        cond = extra[(FACTS_DEAD_LETTER, "run")].as_string() == run_id
    return cond


def _matching(
    q: Any, namespace: str | None, ids: Sequence[str] | None
) -> Any:  # a select or an update
    if namespace is not None:
        q = q.where(col(T.namespace) == namespace)
    if ids is not None:
        uuids = []
        for i in ids:
            try:
                uuids.append(uuid.UUID(i))
            except ValueError:
                continue  # not a UUID: it is matched as a key below
        q = q.where(or_(col(T.id).in_(uuids), col(T.key).in_(list(ids))))
    return q


def dead_parts(row: Trajectory, run_id: str | None = None) -> list[DeadPart]:
    """The parked parts of a trajectory (all, or those one flow run parked)."""
    out = []
    if row.status == TrajectoryStatus.dead_letter.value and run_id in (None, row.dead_letter_run):
        out.append(DeadPart("retrospect", row.error or "no error recorded", row.dead_letter_run))
    facts = (row.extra or {}).get(FACTS_DEAD_LETTER)
    if isinstance(facts, dict) and run_id in (None, facts.get("run")):
        out.append(
            DeadPart("facts", str(facts.get("error") or "no error recorded"), facts.get("run"))
        )
    return out


def dead_letter_error(row: Trajectory) -> str:
    """What went wrong, part by part ("facts: ..." for a parked facts part)."""
    return "; ".join(
        p.error if p.part == "retrospect" else f"facts: {p.error}" for p in dead_parts(row)
    )


def list_dead_letters(
    *,
    engine: Engine,
    namespace: str | None = None,
    limit: int | None = 1000,
    run_id: str | None = None,
    offset: int = 0,
) -> list[Trajectory]:
    """Trajectories with a parked part (all, or those one flow run parked), oldest first;
    limit None: every one (what a flow run's count must see); offset: a later page."""
    q = select(T).where(or_(_retro_parked(run_id), _facts_parked(run_id)))
    q = _matching(q, namespace, None).order_by(col(T.created_at), col(T.id))
    if limit is not None:
        q = q.limit(limit)
    if offset:
        q = q.offset(offset)
    with Session(engine) as session:
        return list(session.execute(q).scalars())


def count_dead_letters(*, engine: Engine, namespace: str | None = None) -> int:
    """Every dead letter (a page may not be all of them): a run with a parked part."""
    q = select(func.count()).select_from(T).where(or_(_retro_parked(None), _facts_parked(None)))
    with Session(engine) as session:
        return int(session.execute(_matching(q, namespace, None)).scalar_one())


def _without_facts_dead_letter(engine: Engine) -> Any:
    extra = col(T.extra)
    if engine.dialect.name == "postgresql":
        return extra.op("-")(bindparam("facts_key", FACTS_DEAD_LETTER, type_=String))
    return func.json_remove(extra, f"$.{FACTS_DEAD_LETTER}")


def redrive(
    *,
    engine: Engine,
    ids: Sequence[str] | None,
    namespace: str | None = None,
    run_id: str | None = None,
) -> int:
    """Send dead letters (by id or key; None: all; or those one flow run parked) back to
    their queue: a parked retrospection to pending, a parked facts part to the facts stage's
    next run. Returns how many runs (a run with both parts parked is one)."""
    retro = _matching(update(T).where(_retro_parked(run_id)), namespace, ids)
    facts = _matching(update(T).where(_facts_parked(run_id)), namespace, ids)
    which = _matching(
        select(col(T.id)).where(or_(_retro_parked(run_id), _facts_parked(run_id))), namespace, ids
    )
    with session_scope(engine) as session:
        runs = len(session.execute(which).all())
        session.execute(
            retro.values(
                status=TrajectoryStatus.pending.value,
                lease_owner=None,
                lease_until=None,
                dead_letter_run=None,
            )
        )
        session.execute(
            facts.values(extra=_without_facts_dead_letter(engine)).execution_options(
                synchronize_session=False
            )
        )
        return runs


@dataclass(frozen=True)
class Rejection:
    """An LLM answer refused for its content: which run and part, why, and the answer."""

    trajectory_id: uuid.UUID
    key: str
    namespace: str
    part: str
    reason: str
    raw: str
    run: str | None
    at: str
    repeats: int = 0  # times the same reason came back after this one (asking again)


def list_rejections(
    *,
    engine: Engine,
    namespace: str | None = None,
    limit: int | None = 1000,
    run_id: str | None = None,
) -> list[Rejection]:
    """Rejections (all, or those one run made), oldest run first: LLM answers wrong by
    content (part "retrospect" or "facts") and drafts refused on their way to the store
    (part "draft", the reason led by "rejected" or "quarantined")."""
    answer, drafts = col(T.extra)[REJECTED], col(T.extra)[DRAFTS_REJECTED]
    if run_id is None:
        q = select(T).where(or_(answer.as_string().is_not(None), drafts.as_string().is_not(None)))
    else:
        q = select(T).where(
            or_(
                col(T.extra)[(REJECTED, "run")].as_string() == run_id,
                col(T.extra)[(DRAFTS_REJECTED, "run")].as_string() == run_id,
            )
        )
    q = _matching(q, namespace, None).order_by(col(T.created_at), col(T.id))
    if limit is not None:
        q = q.limit(limit)
    with Session(engine) as session:
        rows = list(session.execute(q).scalars())
    out = [x for r in rows for x in _rejections_of(r, run_id)]
    return out if limit is None else out[:limit]


def _rejections_of(r: Trajectory, run_id: str | None) -> list[Rejection]:
    """A run's rejected answer and refused drafts (those one flow run made, with run_id)."""
    extra, out = r.extra or {}, []
    got = extra.get(REJECTED)
    if isinstance(got, dict) and run_id in (None, got.get("run")):
        out.append(
            Rejection(
                trajectory_id=r.id,
                key=r.key,
                namespace=r.namespace,
                part=str(got.get("part", "")),
                reason=str(got.get("reason", "")),
                raw=str(got.get("raw", "")),
                run=got.get("run"),
                at=str(got.get("at", "")),
                repeats=int(got.get("repeats", 0)),
            )
        )
    refused = extra.get(DRAFTS_REJECTED)
    if isinstance(refused, dict) and run_id in (None, refused.get("run")):
        out += [
            Rejection(
                trajectory_id=r.id,
                key=r.key,
                namespace=r.namespace,
                part="draft",
                reason=f"{d.get('status', '')}: {d.get('reason', '')}",
                raw=str(d.get("raw", "")),
                run=refused.get("run"),
                at=str(refused.get("at", "")),
            )
            for d in refused.get("drafts") or []
            if isinstance(d, dict)
        ]
    return out
