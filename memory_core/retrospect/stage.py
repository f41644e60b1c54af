"""The retrospect stage: claim a batch, extract drafts, write them and finish the claim at once."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.cards.writer import write_drafts
from memory_core.db import session_scope
from memory_core.errors import LeaseLost
from memory_core.models.card import CardStatus
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Outcome, Step, Trajectory, TrajectoryStatus
from memory_core.retrospect.claims import claim_batch, release
from memory_core.retrospect.drafts import DraftCard, Extractor, TrajectoryView

log = logging.getLogger(__name__)
T = Trajectory


@dataclass
class BatchResult:
    """What one retrospect batch did."""

    claimed: int = 0
    done: int = 0
    dead_letters: int = 0
    cards_created: int = 0
    evidence_added: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, other: BatchResult) -> None:
        """Accumulate another batch's counts into this one."""
        self.claimed += other.claimed
        self.done += other.done
        self.dead_letters += other.dead_letters
        self.cards_created += other.cards_created
        self.evidence_added += other.evidence_added
        self.errors.extend(other.errors)


def view_of(row: Trajectory) -> TrajectoryView:
    """The extractor's view of a stored trajectory."""
    return TrajectoryView(
        id=row.id,
        namespace=row.namespace,
        task_type=row.task_type,
        agent_id=row.agent_id,
        outcome=Outcome(row.outcome),
        steps=[Step.model_validate(s) for s in row.steps],
    )


def process_batch(
    *,
    engine: Engine,
    rows: list[Trajectory],
    extractor: Extractor,
    worker: str,
    card_status: CardStatus = CardStatus.active,
) -> BatchResult:
    """Extract from claimed rows; write cards and mark rows done in one transaction."""
    result = BatchResult(claimed=len(rows))
    drafts: dict[str, list[DraftCard]] = {}
    per_row: dict[object, int] = {}
    failed: dict[object, str] = {}
    for row in rows:
        try:
            found = extractor.extract(view_of(row))
        # one poisoned trajectory must not block the queue: it is parked with its error
        except Exception as exc:  # noqa: BLE001
            failed[row.id] = f"{type(exc).__name__}: {exc}"
            log.error("trajectory %s failed extraction: %s", row.id, failed[row.id])
            continue
        drafts.setdefault(row.namespace, []).extend(found)
        per_row[row.id] = len(found)
    now = utcnow()
    with session_scope(engine) as session:
        owned = (
            update(T)
            .where(
                col(T.id).in_([r.id for r in rows]),
                col(T.lease_owner) == worker,
                col(T.status) == TrajectoryStatus.processing.value,
            )
            .values(
                status=TrajectoryStatus.done.value,
                processed_at=now,
                lease_owner=None,
                lease_until=None,
                error=None,
            )
        )
        claimed_rows = session.execute(owned).rowcount  # type: ignore[attr-defined]
        if claimed_rows != len(rows):
            raise LeaseLost(f"worker {worker} lost the lease on part of its batch")
        for rid, err in failed.items():
            session.execute(
                update(T)
                .where(col(T.id) == rid)
                .values(status=TrajectoryStatus.dead_letter.value, error=err[:2000])
            )
        if per_row:
            session.execute(
                update(T), [{"id": rid, "cards_written": n} for rid, n in per_row.items()]
            )
        for namespace, found in drafts.items():
            w = write_drafts(
                session=session,
                namespace=namespace,
                drafts=found,
                status=card_status,
                provenance={"producer": extractor.name, "source": "agent_run"},
            )
            result.cards_created += w.created
            result.evidence_added += w.evidence_added
    result.done = len(rows) - len(failed)
    result.dead_letters = len(failed)
    result.errors = list(failed.values())
    return result


def retrospect_once(
    *,
    engine: Engine,
    extractor: Extractor,
    worker: str,
    batch_size: int,
    lease: timedelta,
    namespace: str | None = None,
) -> BatchResult:
    """Claim and process one batch; an empty result means nothing was pending."""
    rows = claim_batch(
        engine=engine, worker=worker, batch_size=batch_size, lease=lease, namespace=namespace
    )
    if not rows:
        return BatchResult()
    try:
        return process_batch(engine=engine, rows=rows, extractor=extractor, worker=worker)
    except LeaseLost:
        release(engine=engine, worker=worker)
        raise
