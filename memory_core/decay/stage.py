"""The decay stage: plan the rules, then apply the plan set-based, in one transaction.

Apply first cuts the plan to one row per card, then runs three statements whatever the
number of cards: history rows, archive rows, and one update of the changed cards, each an
INSERT…SELECT or UPDATE…FROM the plan.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import case, func, insert, literal, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from memory_core.decay.params import Change, DecayParams, DecayReport
from memory_core.decay.plan import CARD, PLAN, RULE_ORDER, build_plan, keep_final_rows
from memory_core.decay.sql import json_object, run_uuids, ts
from memory_core.errors import ConcurrentUpdate
from memory_core.models.card import CardArchive, CardVersion
from memory_core.models.columns import new_id, utcnow
from memory_core.settings import RankingWeights

ACTOR = "decay"
PG_WORK_MEM = "256MB"
_ARCHIVING = ("unused", "cap")


@contextmanager
def _transaction(engine: Engine) -> Iterator[Connection]:
    """One transaction; on PostgreSQL one snapshot for all statements (REPEATABLE READ), so
    a card changed by someone else meanwhile fails the run instead of losing their update."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        try:
            with conn.begin():
                if conn.dialect.name == "postgresql":
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


def run_decay(
    *,
    engine: Engine,
    params: DecayParams,
    weights: RankingWeights,
    namespace: str | None = None,
    list_limit: int | None = -1,
) -> DecayReport:
    """Run (or, with params.dry_run, only plan) time decay, the unused archive and the cap.

    namespace None: every namespace (the cap still counts per namespace). The report lists
    up to list_limit changes (None: all; -1, the default: all on a dry run, none applying)."""
    if list_limit == -1:
        list_limit = None if params.dry_run else 0
    now = params.now or utcnow()
    run_id = new_id()
    with _transaction(engine) as conn:
        build_plan(conn, params=params, weights=weights, now=now, namespace=namespace)
        counts = {
            str(rule): int(n)
            for rule, n in conn.execute(select(PLAN.c.rule, func.count()).group_by(PLAN.c.rule))
        }
        changes = _changes(conn, list_limit) if list_limit != 0 else []
        if params.dry_run:
            conn.rollback()  # the plan table goes with it: a dry run leaves nothing behind
        else:
            _apply(conn, run_id=run_id, now=now)
            PLAN.drop(conn)
    return DecayReport(
        run_id=run_id,
        now=now,
        namespace=namespace,
        dry_run=params.dry_run,
        counts={rule: counts.get(rule, 0) for rule in RULE_ORDER},
        changes=changes,
    )


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
    # time decay alone leaves updated_at: retrieval's recency reads it for unused cards, and
    # fading must not make a card look fresh
    conn.execute(
        update(CARD)
        .where(CARD.c.card_id == f.card_id)
        .values(
            confidence=f.confidence_after,
            decay_tier=f.tier_after,
            status=f.status_after,
            version=f.version_after,
            updated_at=case((f.rule == "decay", CARD.c.updated_at), else_=ts(now)),
        )
    )
