"""Contrast at batch time: find the sibling runs (same namespace, same task group) in the DB.

Retrospection runs per batch, but a contrast needs every run of the task, so each batch
reads the stored siblings of the groups it touches (any status but dead-letter: a stored
run's steps and outcome are final) and contrasts the whole group again. The group key is
kept in the run's `extra`, written at ingest (so a batch sees the whole group however the runs
were batched) and here for runs stored before that; writing it is idempotent, and so is the
contrast (the same cards, no new evidence).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from memory_core.db import session_scope
from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.models.trajectory import Outcome, Step, Trajectory, TrajectoryStatus
from memory_core.retrospect.call_features import Atom
from memory_core.retrospect.contradict import contradicting
from memory_core.retrospect.contrast import contrast_group, task_group
from memory_core.retrospect.contrast_answers import FinalAnswer, answer_cautions, card_tool
from memory_core.retrospect.keys import CallTable
from memory_core.retrospect.view_cache import VIEWS

GROUP_KEY = "hindsight_task_group"
GROUP_RUNS = 64  # a group's newest runs contrasted (4 in the tau-bench data, 5 in Reflexion's)
T = Trajectory


def contrast_batch(
    *,
    engine: Engine,
    rows: Sequence[Trajectory],
    screen: bool = True,
    tables: Mapping[str, CallTable] | None = None,
    finals: Mapping[str, FinalAnswer | None] | None = None,
) -> dict[uuid.UUID, list[DraftCard]]:
    """Contrast drafts for the task groups of a batch, each attached to one run of the batch
    (with the screen, calls made on an injected order teach nothing; with a namespace's call
    table, a caution is keyed only on features that separate across tasks; with its
    final-answer tool, failed answers are contrasted by what preceded them, never by value)."""
    keys: dict[uuid.UUID, tuple[str, str]] = {}
    for row in rows:
        key = task_group(extra=row.extra or {}, steps=[Step.model_validate(s) for s in row.steps])
        if key is not None:
            keys[row.id] = (row.namespace, key)
    with session_scope(engine) as session:  # the group key, for later batches to find siblings
        for row in rows:
            if row.id in keys and row.task_group != keys[row.id][1]:
                session.execute(
                    update(T)
                    .where(col(T.id) == row.id)
                    .values(
                        task_group=keys[row.id][1],
                        extra={**(row.extra or {}), GROUP_KEY: keys[row.id][1]},
                    )
                )
    members: dict[tuple[str, str], set[uuid.UUID]] = defaultdict(set)
    wins: dict[str, dict[uuid.UUID, TrajectoryView]] = defaultdict(dict)
    group_of = {rid: key for rid, (_, key) in keys.items()}  # contradictions name their task
    for row in rows:
        view = VIEWS.view(row)
        if row.id in keys:
            members[keys[row.id]].add(row.id)
        if view.outcome is Outcome.success:
            wins[row.namespace][row.id] = view
    out: dict[uuid.UUID, list[DraftCard]] = defaultdict(list)
    drafts: dict[str, list[DraftCard]] = defaultdict(list)
    with Session(engine) as session:
        for (namespace, key), mine in members.items():
            # the group's newest runs: a task run every day must not make each batch read
            # (and each night contrast) all its history
            views = {s.id: VIEWS.view(s) for s in session.exec(newest_of(namespace, key)).all()}
            group_of.update(dict.fromkeys(views, key))
            wins[namespace].update(
                {rid: v for rid, v in views.items() if v.outcome is Outcome.success}
            )
            ordered = sorted(views.values(), key=lambda v: str(v.id))
            found = contrast_group(
                ordered,
                group=key,
                skip_tainted=screen,
                tainted_of=VIEWS.tainted,
                keeps=_keeps(tables.get(namespace)) if tables is not None else None,
            )
            final = (finals or {}).get(namespace)
            if final is not None:  # the final answer: by the shape of what came before it
                found = [d for d in found if card_tool(d.preconditions) != final.tool]
                found += answer_cautions(
                    ordered, group=key, final=final, tainted_of=VIEWS.tainted if screen else None
                )
            if found:
                holder = min(mine, key=str)  # a run of this batch carries the group's cards
                out[holder].extend(found)
                drafts[namespace].extend(found)
    for namespace in sorted(set(wins) | set(drafts)):
        extra = contradicting(
            engine=engine,
            namespace=namespace,
            drafts=drafts[namespace],
            wins=sorted(wins[namespace].values(), key=lambda v: str(v.id)),
            groups=group_of,
        )
        if extra:
            holder = min((r.id for r in rows if r.namespace == namespace), key=str)
            out[holder].extend(extra)
    return dict(out)


def _keeps(table: CallTable | None) -> Callable[[str, Atom | None], bool]:
    if table is None:
        return lambda tool, atom: False
    return lambda tool, atom: (
        table.tool_separates(tool) if atom is None else table.separates(tool, atom, signature=None)
    )


def siblings_of(namespace: str, group: str) -> tuple[Any, ...]:
    """The filter of a task group's stored runs (a dead letter's outcome is not final)."""
    return (
        col(T.namespace) == namespace,
        col(T.task_group) == group,
        col(T.status) != TrajectoryStatus.dead_letter.value,
    )


def newest_of(namespace: str, group: str) -> Any:
    """The select of a group's newest GROUP_RUNS stored runs."""
    return (
        select(T)
        .where(*siblings_of(namespace, group))
        .order_by(col(T.created_at).desc(), col(T.id))
        .limit(GROUP_RUNS)
    )


def newest_run(stamps: Sequence[tuple[uuid.UUID, Any]]) -> uuid.UUID:
    """The run of a group that holds its LLM contrast: the latest created_at, then id."""
    return max(stamps, key=lambda r: (r[1], str(r[0])))[0]


def contrast_holders(
    *, engine: Engine, rows: Sequence[Trajectory]
) -> dict[uuid.UUID, tuple[int, int]]:
    """The rows that will hold their group's LLM contrast (the newest of a group with a
    success and a failure): row id -> the group's (successful, failed) runs."""
    out: dict[uuid.UUID, tuple[int, int]] = {}
    groups: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
    for row in rows:
        if row.task_group:
            groups[(row.namespace, row.task_group)].append(row)
    with Session(engine) as session:
        for (namespace, key), mine in groups.items():
            stored = session.execute(
                select(col(T.id), col(T.created_at), col(T.outcome)).where(
                    *siblings_of(namespace, key)
                )
            ).all()
            if not stored:
                continue
            holder = newest_run([(r[0], r[1]) for r in stored])
            wins = sum(r[2] == Outcome.success.value for r in stored)
            losses = sum(r[2] == Outcome.failure.value for r in stored)
            if wins and losses and any(r.id == holder for r in mine):
                out[holder] = (wins, losses)
    return out
