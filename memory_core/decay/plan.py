"""The decay plan: one INSERT…SELECT per rule into a temporary table, in rule order.

Each rule reads the cards and the plan so far (the cap ranks cards at their decayed
confidence, without the ones already leaving), so the plan is exactly what applying it
does; the dry run shows this same table and rolls back. Every row goes from the card as it
was to the card after the rules so far (an archive row includes the decay before it), so a
card changed by two rules still gets one new version.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import (
    Float,
    case,
    delete,
    exists,
    func,
    insert,
    literal,
    over,
    select,
)
from sqlalchemy.engine import Connection

from memory_core.cards.score import standing
from memory_core.decay.effect_rules import plan_effects, protected
from memory_core.decay.params import DecayParams, Rule
from memory_core.decay.plan_table import (
    ACTIVE,
    ARCHIVED,
    CARD,
    MODIFYING,
    PLAN,
    SQLITE_INDEX,
    after_decay,
    scope,
)
from memory_core.decay.sql import days_since, halvings, ts
from memory_core.decay.tiers import due_tier, idle_since, tier_step
from memory_core.settings import RankingWeights

__all__ = ["ACTIVE", "ARCHIVED", "CARD", "PLAN", "build_plan", "keep_final_rows"]


def plan_decay(conn: Connection, *, params: DecayParams, now: datetime, ns: str | None) -> None:
    """Rule 1: active cards idle past a tier they have not had yet lose confidence, once."""
    due = due_tier(idle_since(), params.tiers, now)
    cand = (
        select(
            CARD.c.card_id,
            CARD.c.namespace,
            CARD.c.confidence,
            CARD.c.decay_tier,
            CARD.c.status,
            CARD.c.version,
            CARD.c.use_count,
            idle_since().label("idle_since"),
            due.label("due"),
        )
        .where(*scope(ns))
        .subquery()
    )
    rows = select(
        cand.c.card_id,
        cand.c.namespace,
        literal("decay"),
        cand.c.confidence,
        cand.c.confidence * tier_step(params.tiers, cand.c.decay_tier, cand.c.due, "factor"),
        cand.c.status,
        cand.c.status,
        cand.c.decay_tier,
        cand.c.due,
        cand.c.version + 1,
        cand.c.idle_since,
        literal(None, Float),
        tier_step(params.tiers, cand.c.decay_tier, cand.c.due, "reason"),
        cand.c.version,
        cand.c.use_count,
    ).where(cand.c.due > cand.c.decay_tier)
    conn.execute(insert(PLAN).from_select(list(PLAN.c.keys()), rows))


def plan_unused(conn: Connection, *, params: DecayParams, now: datetime, ns: str | None) -> None:
    """Rule 2: active cards idle for archive_after_days or more go to the archive."""
    joined, (conf, tier, decayed) = after_decay()
    cutoff = ts(now - timedelta(days=params.archive_after_days))
    rows = (
        select(
            CARD.c.card_id,
            CARD.c.namespace,
            literal("unused"),
            CARD.c.confidence,
            conf,
            CARD.c.status,
            literal(ARCHIVED),
            CARD.c.decay_tier,
            tier,
            CARD.c.version + 1,
            idle_since(),
            literal(None, Float),
            decayed + literal(f"archived: unused {params.archive_after_days:g}+ days"),
            CARD.c.version,
            CARD.c.use_count,
        )
        .select_from(joined)
        .where(*scope(ns), idle_since() <= cutoff)
    )
    conn.execute(insert(PLAN).from_select(list(PLAN.c.keys()), rows))


def plan_cap(
    conn: Connection,
    *,
    params: DecayParams,
    weights: RankingWeights,
    now: datetime,
    ns: str | None,
    dialect: str,
) -> None:
    """Rule 5: above the cap, the lowest retrieval scores in a namespace go to the archive.

    The score is cards.score.standing built on columns (the same function retrieval ranks
    with), use_frequency against the namespace's most used card, ties as retrieval breaks them."""
    joined, (conf, tier, decayed) = after_decay()
    leaving = PLAN.alias("u")
    staying = (
        select(
            CARD.c.card_id,
            CARD.c.namespace,
            CARD.c.status,
            CARD.c.use_count,
            CARD.c.evidence_count,
            CARD.c.run_count,
            CARD.c.confidence,
            CARD.c.decay_tier,
            CARD.c.version,
            conf.label("conf"),
            tier.label("tier"),
            decayed.label("decayed"),
            idle_since().label("idle_since"),
            halvings(
                days_since(dialect, now, func.coalesce(CARD.c.last_used_at, CARD.c.updated_at)),
                weights.recency_half_life_days,
            ).label("recency"),
            over(func.max(CARD.c.use_count), partition_by=CARD.c.namespace).label("max_uses"),
            protected(params.effects).label("protected"),
        )
        .select_from(joined)
        .where(
            *scope(ns),
            ~exists().where(
                leaving.c.card_id == CARD.c.card_id, leaving.c.rule.in_(("unused", "harms"))
            ),
        )
        .subquery("staying")
    )
    s = staying.c
    freq = case((s.max_uses > 0, s.use_count * 1.0 / s.max_uses), else_=literal(0.0))
    score = standing(confidence=s.conf, recency=s.recency, use_frequency=freq, w=weights)
    ranked = select(
        s.card_id,
        s.namespace,
        s.confidence,
        s.conf,
        s.status,
        s.decay_tier,
        s.tier,
        s.version,
        s.idle_since,
        s.decayed,
        s.use_count,
        score.label("score"),
        over(
            func.row_number(),
            partition_by=s.namespace,
            # a card proven to help is evicted last, whatever its score
            # ties as retrieval breaks them: seen in more runs, then more evidence rows
            order_by=(
                s.protected.desc(),
                score.desc(),
                s.run_count.desc(),
                s.evidence_count.desc(),
                s.card_id,
            ),
        ).label("rank"),
    ).subquery("ranked")
    r = ranked.c
    rows = select(
        r.card_id,
        r.namespace,
        literal("cap"),
        r.confidence,
        r.conf,
        r.status,
        literal(ARCHIVED),
        r.decay_tier,
        r.tier,
        r.version + 1,
        r.idle_since,
        r.score,
        r.decayed + literal(f"archived: lowest scores over the cap of {params.cap} active cards"),
        r.version,
        r.use_count,
    ).where(r.rank > params.cap)
    conn.execute(insert(PLAN).from_select(list(PLAN.c.keys()), rows))


def build_plan(
    conn: Connection,
    *,
    params: DecayParams,
    weights: RankingWeights,
    now: datetime,
    namespace: str | None,
) -> None:
    """Fill a fresh plan table, rule by rule (inside the caller's transaction)."""
    dialect = conn.dialect.name
    PLAN.drop(conn, checkfirst=True)
    PLAN.create(conn)
    if dialect != "postgresql":
        conn.exec_driver_sql(SQLITE_INDEX)
    plan_decay(conn, params=params, now=now, ns=namespace)
    plan_unused(conn, params=params, now=now, ns=namespace)
    if params.effects.aware:
        plan_effects(conn, params=params, now=now, ns=namespace)
    plan_cap(conn, params=params, weights=weights, now=now, ns=namespace, dialect=dialect)


def keep_final_rows(conn: Connection) -> None:
    """Leave one plan row per card, its state at the end of the run: a card that decays and
    then leaves keeps only its archive row (which carries the decay too)."""
    a = PLAN.alias("a")
    leaving = exists().where(a.c.card_id == PLAN.c.card_id, a.c.rule.not_in(MODIFYING))
    conn.execute(delete(PLAN).where(PLAN.c.rule.in_(MODIFYING), leaving))
    if conn.dialect.name == "postgresql":
        # temporary tables get no autovacuum stats; the apply statements join on this one
        conn.exec_driver_sql("ANALYZE decay_plan")


RULE_ORDER: dict[Rule, int] = {"decay": 0, "unused": 1, "harms": 2, "fade": 3, "cap": 4}
