"""Rules first: a claimed run's rule lesson is written at once, before any LLM call.

The LLM part of a run is its own unit of work: when it fails, only that part is
dead-lettered (and re-driven later); the rule cards are already in the store. `rules_at`
marks the runs whose rule drafts are written, so a re-driven run does not write them twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import bindparam, update
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.db import session_scope
from memory_core.errors import LeaseLost
from memory_core.models.card import CardStatus
from memory_core.models.columns import utcnow
from memory_core.models.drafts import DraftCard, Extractor, view_of
from memory_core.models.trajectory import Step, Trajectory, TrajectoryStatus
from memory_core.retrospect.siblings import contrast_batch
from memory_core.retrospect.stage import write_run_drafts
from memory_core.screen.gate import untaint

log = logging.getLogger(__name__)
T = Trajectory


@dataclass
class RulesResult:
    """Rule cards written for a claimed batch, and the runs the rule extractor choked on."""

    written: int = 0  # runs whose rule drafts were written now
    cards_created: int = 0
    evidence_added: int = 0
    refused: int = 0  # drafts that failed the trust screen: rejections, kept on their run
    failed: dict[uuid.UUID, str] = field(default_factory=dict)


def write_rule_lessons(
    *,
    engine: Engine,
    rows: Sequence[Trajectory],
    extractor: Extractor,
    worker: str,
    card_status: CardStatus = CardStatus.draft,
    screen: bool = True,
    run_id: str | None = None,
) -> RulesResult:
    """In one transaction: the rule drafts of the claimed rows not yet done, and their rules_at.

    The same lessons as the rules-only path: each run's drafts, the contrast of its task's
    failed and successful runs, and (with the screen) no call made on an injected order."""
    result = RulesResult()
    per_row: dict[uuid.UUID, list[DraftCard]] = {}
    for row in rows:
        if row.rules_at is not None:
            continue  # a re-driven run: its rule lesson is already stored
        try:
            per_row[row.id] = extractor.extract(view_of(row)).drafts
        # one poisoned trajectory must not stop the batch: it is parked with its error
        except Exception as exc:  # noqa: BLE001
            result.failed[row.id] = f"rules: {type(exc).__name__}: {exc}"
            log.error("trajectory %s failed rule extraction: %s", row.id, result.failed[row.id])
    fresh = [r for r in rows if r.id in per_row]
    for rid, extra in contrast_batch(engine=engine, rows=fresh, screen=screen).items():
        per_row[rid].extend(extra)
    counts: dict[uuid.UUID, int] = {}
    runs: list[tuple[uuid.UUID, str, list[DraftCard]]] = []
    for row in fresh:
        drafts = per_row[row.id]
        if screen:  # calls made on an instruction from a tool or user teach nothing
            drafts = untaint(drafts, [Step.model_validate(s) for s in row.steps])
        counts[row.id] = len(drafts)
        runs.append((row.id, row.namespace, drafts))
    if not counts:
        return result
    now = utcnow()
    with session_scope(engine) as session:
        marked = session.execute(
            update(T)
            .where(
                col(T.id).in_(list(counts)),
                col(T.lease_owner) == worker,
                col(T.status) == TrajectoryStatus.processing.value,
            )
            .values(rules_at=now)
        )
        if marked.rowcount != len(counts):  # type: ignore[attr-defined]
            raise LeaseLost(f"worker {worker} lost the lease on part of its batch")
        session.connection().execute(
            update(T).where(col(T.id) == bindparam("rid")).values(cards_written=bindparam("n")),
            [{"rid": rid, "n": n} for rid, n in counts.items()],
        )
        result.cards_created, result.evidence_added, result.refused = write_run_drafts(
            session=session, runs=runs, status=card_status, screen=screen, run_id=run_id
        )
    result.written = len(counts)
    return result
