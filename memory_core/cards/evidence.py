"""Read the runs behind cards from their evidence rows (for merges and explanations)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.cards.confidence import RunEvidence, run_of, runs_of_pair
from memory_core.db import read_session
from memory_core.models.card import CardEvidence

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
