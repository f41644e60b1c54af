"""The retrospect stage: claim a batch, extract drafts, write them and finish the claim at once."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Protocol

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.writer import write_drafts
from memory_core.db import session_scope
from memory_core.errors import LeaseLost
from memory_core.heartbeat import Heartbeat, Liveness
from memory_core.models.card import CardStatus
from memory_core.models.columns import utcnow
from memory_core.models.drafts import DraftCard, Extraction, Extractor, view_of
from memory_core.models.trajectory import Step, Trajectory, TrajectoryStatus
from memory_core.retrospect.claims import claim_batch, release
from memory_core.retrospect.contrast_answers import stored_final_answers, without_answer_keys
from memory_core.retrospect.keys import generalise_warnings, stored_tables
from memory_core.retrospect.placeholders import without_placeholders
from memory_core.retrospect.rejections import keep_refused_drafts, keep_rejections
from memory_core.retrospect.siblings import contrast_batch
from memory_core.retrospect.summary import BatchResult
from memory_core.screen.gate import screen_draft, untaint

log = logging.getLogger(__name__)
T = Trajectory


class Claimed(Protocol):
    """What finishing a batch needs to know of each claimed trajectory."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def namespace(self) -> str: ...


def write_run_drafts(
    *,
    session: Session,
    runs: Sequence[tuple[uuid.UUID, str, list[DraftCard]]],
    status: CardStatus,
    screen: bool,
    run_id: str | None = None,
) -> tuple[int, int, int]:
    """Write the drafts of agent runs (run id, namespace, drafts), namespace by namespace:
    cards created, evidence added, and drafts refused (failed grounding or the trust screen),
    which are also kept on their run as rejections."""
    by_namespace: dict[str, list[DraftCard]] = {}
    by_run: dict[uuid.UUID, list[DraftCard]] = {}
    for rid, namespace, drafts in runs:
        # screened here, not in the writer, so each run knows which of its drafts were refused
        screened = [screen_draft(d) for d in drafts] if screen else list(drafts)
        by_run.setdefault(rid, []).extend(screened)
        by_namespace.setdefault(namespace, []).extend(screened)
    created = evidence = 0
    for namespace, drafts in by_namespace.items():
        w = write_drafts(
            session=session,
            namespace=namespace,
            drafts=drafts,
            status=status,
            provenance={"source": "agent_run"},
            screen=False,
        )
        created, evidence = created + w.created, evidence + w.evidence_added
    return created, evidence, keep_refused_drafts(session, by_run, run_id)


def name_groups(drafts: Sequence[DraftCard], groups: Mapping[uuid.UUID, str | None]) -> None:
    """Each evidence row of a run with a task group names it (unless it names one already)."""
    for d in drafts:
        for e in d.evidence:
            if "group" not in e.result and (g := groups.get(e.trajectory_id)):
                e.result = {**e.result, "group": g}


def finish_batch(
    *,
    engine: Engine,
    rows: Sequence[Claimed],
    worker: str,
    extractions: dict[uuid.UUID, Extraction],
    failed: dict[uuid.UUID, str] | None = None,
    deferred: Sequence[uuid.UUID] = (),
    card_status: CardStatus = CardStatus.draft,
    run_id: str | None = None,
    screen: bool = True,
) -> BatchResult:
    """In one transaction: write the drafts, mark rows done / dead-letter / back to pending.

    A dead letter records run_id (the flow run that parked it): retrying that run re-drives it.
    """
    failed = failed or {}
    result = BatchResult(claimed=len(rows))
    now = utcnow()
    ids = [r.id for r in rows]
    with session_scope(engine) as session:
        owned = (
            update(T)
            .where(
                col(T.id).in_(ids),
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
        if session.execute(owned).rowcount != len(rows):  # type: ignore[attr-defined]
            raise LeaseLost(f"worker {worker} lost the lease on part of its batch")
        for rid, err in failed.items():
            session.execute(
                update(T)
                .where(col(T.id) == rid)
                .values(
                    status=TrajectoryStatus.dead_letter.value,
                    error=err[:2000],
                    dead_letter_run=run_id,
                )
            )
        if deferred:  # e.g. the token budget ran out: they wait for the next run
            session.execute(
                update(T)
                .where(col(T.id).in_(list(deferred)))
                .values(
                    status=TrajectoryStatus.pending.value,
                    processed_at=None,
                    attempts=col(T.attempts) - 1,
                )
            )
        if screen and extractions:  # calls made on an instruction from a tool or user teach nothing
            runs = session.execute(
                select(col(T.id), col(T.steps)).where(col(T.id).in_(list(extractions)))
            ).tuples()
            for rid, steps in runs:
                x = extractions[rid]
                x.drafts = untaint(x.drafts, [Step.model_validate(s) for s in steps])
        for x in extractions.values():  # a withheld or masked value keys nothing
            x.drafts = without_placeholders(x.drafts)
        if extractions:  # a task's trials count once for a lesson (memory_core.cards.confidence)
            named = session.execute(
                select(col(T.id), col(T.task_group)).where(
                    col(T.id).in_(list(extractions)), col(T.task_group).is_not(None)
                )
            ).tuples()
            groups = {rid: group for rid, group in named}
            for x in extractions.values():
                name_groups(x.drafts, groups)
        if extractions:
            # added to: the rule drafts of a rules-first run were counted when it was claimed
            session.connection().execute(
                update(T)
                .where(col(T.id) == bindparam("rid"))
                .values(
                    cards_written=col(T.cards_written) + bindparam("n"),
                    tokens_sent=bindparam("sent"),
                    tokens_saved=bindparam("saved"),
                ),
                [
                    {
                        "rid": rid,
                        "n": len(x.drafts),
                        "sent": x.tokens_sent,
                        "saved": x.tokens_saved,
                    }
                    for rid, x in extractions.items()
                ],
            )
        made = [(r.id, r.namespace, extractions[r.id].drafts) for r in rows if r.id in extractions]
        result.cards_created, result.evidence_added, result.drafts_rejected = write_run_drafts(
            session=session,
            runs=made,
            status=card_status,
            screen=screen,
            run_id=run_id,
        )
        rejected = {rid: x.rejected for rid, x in extractions.items() if x.rejected}
        result.rejected = len(rejected)
        result.rejected_again = keep_rejections(session, rejected, run_id, part="retrospect")
    result.dead_letters, result.deferred = len(failed), len(deferred)
    result.done = len(rows) - len(failed) - len(deferred)
    result.errors = list(failed.values())
    for x in extractions.values():
        result.llm_calls += x.calls
        result.tokens_sent += x.tokens_sent
        result.tokens_received += x.tokens_received
        result.tokens_saved += x.tokens_saved
    return result


def process_batch(
    *,
    engine: Engine,
    rows: Sequence[Trajectory],
    extractor: Extractor,
    worker: str,
    card_status: CardStatus = CardStatus.draft,
    run_id: str | None = None,
    screen: bool = True,
) -> BatchResult:
    """Extract from claimed rows one by one, then finish the batch in one transaction."""
    extractions: dict[uuid.UUID, Extraction] = {}
    failed: dict[uuid.UUID, str] = {}
    for row in rows:
        try:
            extractions[row.id] = extractor.extract(view_of(row))
        # one poisoned trajectory must not block the queue: it is parked with its error
        except Exception as exc:  # noqa: BLE001
            failed[row.id] = f"{type(exc).__name__}: {exc}"
            log.error("trajectory %s failed extraction: %s", row.id, failed[row.id])
    # lessons no single run shows: what the failed runs of a task did that its successes did not
    ok = [r for r in rows if r.id in extractions]
    # a key must separate failing from succeeding calls across the namespace's tasks
    tables = stored_tables(engine, {r.namespace for r in ok})
    for r in ok:
        generalise_warnings(extractions[r.id].drafts, tables[r.namespace])
    # the tool that gives a final answer, read from the data: no lesson keys on an answer
    finals = stored_final_answers(engine, {r.namespace for r in ok})
    for rid, drafts in contrast_batch(
        engine=engine, rows=ok, screen=screen, tables=tables, finals=finals
    ).items():
        extractions[rid].drafts.extend(drafts)
    for r in ok:
        x = extractions[r.id]
        x.drafts = without_answer_keys(x.drafts, finals.get(r.namespace))
    return finish_batch(
        engine=engine,
        rows=rows,
        worker=worker,
        extractions=extractions,
        failed=failed,
        card_status=card_status,
        run_id=run_id,
        screen=screen,
    )


def retrospect_once(
    *,
    engine: Engine,
    extractor: Extractor,
    worker: str,
    batch_size: int,
    lease: timedelta,
    namespace: str | None = None,
    run_id: str | None = None,
    screen: bool = True,
    liveness: Liveness = Liveness(),
) -> BatchResult:
    """Claim and process one batch, beating while it works; an empty result means nothing
    was pending."""
    rows = claim_batch(
        engine=engine,
        worker=worker,
        batch_size=batch_size,
        lease=lease,
        namespace=namespace,
        liveness=liveness,
    )
    if not rows:
        return BatchResult()
    try:
        with Heartbeat(engine=engine, worker=worker, every=liveness.every):
            return process_batch(
                engine=engine,
                rows=rows,
                extractor=extractor,
                worker=worker,
                run_id=run_id,
                screen=screen,
            )
    except LeaseLost:
        release(engine=engine, worker=worker)
        raise
