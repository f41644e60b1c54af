"""The decay stage: plan the rules, then apply the plan set-based, in one transaction.

Apply is four statements whatever the number of cards: history rows, archive rows, the
confidence/tier update, the status update, each an INSERT…SELECT or UPDATE…FROM the plan.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import case, func, insert, literal, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from memory_core.decay.params import Change, DecayParams, DecayReport
from memory_core.decay.plan import CARD, PLAN, RULE_ORDER, build_plan
from memory_core.decay.sql import json_object, new_uuid, ts
from memory_core.errors import ConcurrentUpdate
from memory_core.models.card import CardArchive, CardVersion
from memory_core.models.columns import new_id, utcnow
from memory_core.settings import RankingWeights

ACTOR = "decay"
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
                yield conn
        except OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) == "40001":
                raise ConcurrentUpdate(
                    "cards changed while the decay stage ran; run it again (it is safe)"
                ) from exc
            raise


def run_decay(
    *,
    engine: Engine,
    params: DecayParams,
    weights: RankingWeights,
    namespace: str | None = None,
    list_limit: int | None = None,
) -> DecayReport:
    """Run (or, with params.dry_run, only plan) time decay, the unused archive and the cap.

    namespace None: every namespace (the cap still counts per namespace). The report lists
    up to list_limit changes (None: all; the dry run usually wants them, apply does not)."""
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
    p = PLAN.c
    # history first: one version row per change, the snapshot holding what the rule changed
    conn.execute(
        insert(CardVersion).from_select(
            ["id", "card_id", "version", "snapshot", "reason", "actor", "created_at"],
            select(
                new_uuid(dialect),
                p.card_id,
                p.version_after,
                json_object(
                    dialect,
                    rule=p.rule,
                    status=p.status_after,
                    confidence=p.confidence_after,
                    confidence_before=p.confidence_before,
                    decay_tier=p.tier_after,
                ),
                p.reason,
                literal(ACTOR),
                ts(now),
            ),
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
                new_uuid(dialect),
                p.card_id,
                p.namespace,
                literal(run_id),
                p.rule,
                p.reason,
                p.confidence_after,
                p.score,
                ts(now),
            ).where(p.rule.in_(_ARCHIVING)),
        )
    )
    # time decay leaves updated_at alone: retrieval's recency reads it for unused cards, and
    # fading must not make a card look fresh
    conn.execute(
        update(CARD)
        .where(CARD.c.card_id == p.card_id, p.rule == "decay")
        .values(confidence=p.confidence_after, decay_tier=p.tier_after, version=p.version_after)
    )
    conn.execute(
        update(CARD)
        .where(CARD.c.card_id == p.card_id, p.rule.in_(_ARCHIVING))
        .values(status=p.status_after, version=p.version_after, updated_at=ts(now))
    )
