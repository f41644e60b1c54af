"""The decay stage: plan the rules from one snapshot, then apply the plan set-based, in one
transaction.

Apply first cuts the plan to one row per card and to the cards nobody changed since it was
made, then runs three statements whatever the number of cards: history rows, archive rows,
and one update of the changed cards, each an INSERT…SELECT or UPDATE…FROM the plan.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import and_, case, delete, exists, func, insert, literal, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from memory_core.decay.params import Change, DecayParams, DecayReport
from memory_core.decay.plan import CARD, PLAN, RULE_ORDER, build_plan, keep_final_rows
from memory_core.decay.plan_table import MODIFYING
from memory_core.decay.sql import json_object, run_uuids, ts
from memory_core.errors import ConcurrentUpdate
from memory_core.models.card import CardArchive, CardVersion
from memory_core.models.columns import new_id, utcnow
from memory_core.settings import RankingWeights

ACTOR = "decay"
PG_WORK_MEM = "256MB"
SKIPPED_LISTED = 100  # the skipped cards a report names (it counts them all)
_ARCHIVING = ("unused", "cap")


# Why per-row guards and not "plan again on conflict": under live traffic (16 connections on
# 30k cards) some planned card is touched within any window the stage needs, so a plan that
# must apply whole failed 3 runs of 3 and a re-plan would fail the same way, each try longer.
# The plan is read from one snapshot; the apply (a second transaction on the same connection,
# READ COMMITTED) locks the planned cards in key order, drops the plan rows of cards changed
# since (a use, a feedback, new evidence, a review) and applies the rest. A skipped card is
# planned again next night from its new state; what the API acknowledged is never overwritten.
_GUARD = (
    (PLAN.c.version_before, CARD.c.version),
    (PLAN.c.uses_before, CARD.c.use_count),  # uses do not bump the version
    (PLAN.c.confidence_before, CARD.c.confidence),  # nor does new evidence
    (PLAN.c.status_before, CARD.c.status),
)


@contextmanager
def _transaction(conn: Connection, isolation: str) -> Iterator[Connection]:
    """One transaction on conn at this isolation (PostgreSQL), with the stage's settings;
    a deadlock or serialization failure becomes ConcurrentUpdate (safe to run again)."""
    pg = conn.dialect.name == "postgresql"
    if pg:
        conn = conn.execution_options(isolation_level=isolation)
    else:  # SQLite: a plan writes only its temporary table; no write lock while planning
        conn = conn.execution_options(hindsight_read_only=isolation != "READ COMMITTED")
    try:
        with conn.begin():
            if pg:
                # hash joins and the cap's sort over a million cards stay in memory
                conn.exec_driver_sql(f"SET LOCAL work_mem = '{PG_WORK_MEM}'")
                conn.exec_driver_sql("SET LOCAL jit = off")  # compiling costs more here
            yield conn
    except DBAPIError as exc:
        if _concurrent(exc):
            raise ConcurrentUpdate(
                "cards changed while the decay stage ran; run it again (it is safe)"
            ) from exc
        raise


def _concurrent(exc: DBAPIError) -> bool:
    """A serialization failure or deadlock, or a version number someone else took first."""
    state = getattr(exc.orig, "sqlstate", None)
    diag = getattr(exc.orig, "diag", None)
    if state in ("40001", "40P01"):
        return True
    return state == "23505" and getattr(diag, "constraint_name", None) == "uq_card_version"


DECAY_STEPS = 3  # planned, checked, applied


def run_decay(
    *,
    engine: Engine,
    params: DecayParams,
    weights: RankingWeights,
    namespace: str | None = None,
    list_limit: int | None = -1,
    skipped_limit: int = SKIPPED_LISTED,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> DecayReport:
    """Run (or, with params.dry_run, only plan) time decay, the unused archive and the cap.

    namespace None: every namespace (the cap still counts per namespace). The report lists
    up to list_limit changes (None: all; -1, the default: all on a dry run, none applying).
    Cards changed by others while the stage ran are left as they are (report.skipped; the
    first skipped_limit of them, by id, in report.skipped_ids). on_progress, when given,
    hears each step: (what, done, total) in steps of DECAY_STEPS."""

    def step(what: str, done: int) -> None:
        if on_progress is not None:
            on_progress(what, done, DECAY_STEPS)

    if list_limit == -1:
        list_limit = None if params.dry_run else 0
    now = params.now or utcnow()
    run_id = new_id()
    skipped = 0
    skipped_ids: list[uuid.UUID] = []
    with engine.connect() as conn:
        # one snapshot for every rule: each reads the plan the rules before it wrote
        with _transaction(conn, "REPEATABLE READ") as tx:
            step("planning: fading, unused, over the cap", 0)
            build_plan(tx, params=params, weights=weights, now=now, namespace=namespace)
            if params.dry_run:
                counts = _counts(tx)
                changes = _changes(tx, list_limit) if list_limit != 0 else []
                tx.rollback()  # the plan table goes with it: a dry run leaves nothing behind
                step(f"{sum(counts.values())} changes planned, none written", DECAY_STEPS)
            else:
                step("planned; checking the cards did not change meanwhile", 1)
        if not params.dry_run:
            with _transaction(conn, "READ COMMITTED") as tx:
                skipped, skipped_ids = _keep_unchanged(tx, skipped_limit)
                counts = _counts(tx)
                changes = _changes(tx, list_limit) if list_limit != 0 else []
                step(f"applying {sum(counts.values())} changes", 2)
                _apply(tx, run_id=run_id, now=now)
                PLAN.drop(tx)
            step(f"{sum(counts.values())} changes applied", DECAY_STEPS)
    return DecayReport.of_counts(
        counts,
        run_id=None if params.dry_run else run_id,
        now=now,
        dry_run=params.dry_run,
        changes=changes,
        skipped=skipped,
        skipped_ids=skipped_ids,
    )


def _counts(conn: Connection) -> dict[str, int]:
    return {
        str(rule): int(n)
        for rule, n in conn.execute(select(PLAN.c.rule, func.count()).group_by(PLAN.c.rule))
    }


def _keep_unchanged(conn: Connection, listed: int) -> tuple[int, list[uuid.UUID]]:
    """Lock the planned cards still as planned, in key order (the API's use writer locks in
    the same order, so the two never deadlock); drop the plan rows of the others. Returns how
    many cards were dropped and the first `listed` of them."""
    same = and_(CARD.c.card_id == PLAN.c.card_id, *(p == c for p, c in _GUARD))
    changed = select(func.count(PLAN.c.card_id.distinct())).where(~exists().where(same))
    skipped = int(conn.execute(changed).scalar_one())
    ids: list[uuid.UUID] = []
    if skipped and listed > 0:
        ids = list(
            conn.execute(
                select(PLAN.c.card_id)
                .where(~exists().where(same))
                .distinct()
                .order_by(PLAN.c.card_id)
                .limit(listed)
            ).scalars()
        )
    if conn.dialect.name == "postgresql":
        # FOR UPDATE re-reads a row changed since the statement began and skips it if the
        # guard no longer holds; SQLite needs no lock: its writer holds the database
        locking = (
            select(CARD.c.card_id)
            .where(same)
            .order_by(CARD.c.card_id)
            .with_for_update(of=CARD)
            .subquery()
        )
        conn.execute(select(func.count()).select_from(locking)).scalar_one()
    conn.execute(delete(PLAN).where(~exists().where(same)))
    return skipped, ids


def _changes(conn: Connection, limit: int | None) -> list[Change]:
    order = case(*((PLAN.c.rule == r, literal(i)) for r, i in RULE_ORDER.items()))
    q = select(PLAN).order_by(PLAN.c.namespace, order, PLAN.c.score, PLAN.c.card_id)
    if limit is not None:
        q = q.limit(limit)
    return [Change.model_validate(dict(row)) for row in conn.execute(q).mappings()]


def _apply(conn: Connection, *, run_id: uuid.UUID, now: datetime) -> None:
    dialect = conn.dialect.name
    keep_final_rows(conn)
    f = PLAN.c
    # history: one version row per changed card, the snapshot holding what the run changed
    conn.execute(
        insert(CardVersion).from_select(
            ["id", "card_id", "version", "snapshot", "reason", "actor", "created_at"],
            select(
                run_uuids(dialect, run_id, f.card_id),
                f.card_id,
                f.version_after,
                json_object(
                    dialect,
                    rule=f.rule,
                    status=f.status_after,
                    confidence=f.confidence_after,
                    confidence_before=f.confidence_before,
                    decay_tier=f.tier_after,
                ),
                f.reason,
                literal(ACTOR),
                ts(now),
            ).order_by(f.card_id),  # unique-index inserts and checks in key order
        )
    )
    conn.execute(
        insert(CardArchive).from_select(
            [
                "id",
                "card_id",
                "namespace",
                "run_id",
                "reason",
                "detail",
                "confidence",
                "score",
                "archived_at",
            ],
            select(
                run_uuids(dialect, run_id, f.card_id),
                f.card_id,
                f.namespace,
                literal(run_id),
                f.rule,
                f.reason,
                f.confidence_after,
                f.score,
                ts(now),
            )
            .where(f.rule.in_(_ARCHIVING))
            .order_by(f.card_id),
        )
    )
    # time decay (and the no-effect fade) leave updated_at: retrieval's recency reads it for
    # unused cards, and fading must not make a card look fresh
    conn.execute(
        update(CARD)
        .where(CARD.c.card_id == f.card_id)
        .values(
            confidence=f.confidence_after,
            decay_tier=f.tier_after,
            status=f.status_after,
            version=f.version_after,
            updated_at=case((f.rule.in_(MODIFYING), CARD.c.updated_at), else_=ts(now)),
            effect_faded_at=case((f.rule == "fade", ts(now)), else_=CARD.c.effect_faded_at),
        )
    )
