"""Read the runs behind cards from their evidence rows (for merges and explanations)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.confidence import RunEvidence, run_of, runs_of_pair
from memory_core.db import read_session
from memory_core.models.card import CardEvidence
from memory_core.models.trajectory import Trajectory

_CHUNK = 500  # bounded IN lists (SQLite caps bound parameters)


def runs_by_card(
    *, engine: Engine, card_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, dict[uuid.UUID, RunEvidence]]:
    """For each card, how each run behind it bears on its lesson."""
    out: dict[uuid.UUID, dict[uuid.UUID, RunEvidence]] = defaultdict(dict)
    with read_session(engine) as session:
        for start in range(0, len(card_ids), _CHUNK):
            chunk = list(card_ids[start : start + _CHUNK])
            rows = session.execute(
                select(
                    col(CardEvidence.card_id),
                    col(CardEvidence.trajectory_id),
                    col(CardEvidence.result),
                ).where(col(CardEvidence.card_id).in_(chunk))
            ).all()
            for cid, tid, result in rows:
                run = run_of(result or {})
                if run is not None:
                    out[cid][tid] = runs_of_pair(out[cid].get(tid), run)
    return dict(out)


def grouped_evidence(session: Session, card_ids: Sequence[uuid.UUID], *more: Any) -> Iterator[Any]:
    """Each evidence row of the cards as (card id, run id, result, the run's task group, *more
    columns of the row), in bounded chunks."""
    for start in range(0, len(card_ids), _CHUNK):
        yield from session.execute(
            select(
                col(CardEvidence.card_id),
                col(CardEvidence.trajectory_id),
                col(CardEvidence.result),
                col(Trajectory.task_group),
                *more,
            )
            .outerjoin(Trajectory, col(Trajectory.id) == col(CardEvidence.trajectory_id))
            .where(col(CardEvidence.card_id).in_(list(card_ids[start : start + _CHUNK])))
        ).all()


def group_unit(group: str | None, run: RunEvidence, trajectory_id: uuid.UUID) -> str:
    """The task group a supporting run counts for: its run's, its evidence's, else its own."""
    unit = group or run.group
    return f"group:{unit}" if unit else f"run:{trajectory_id}"
