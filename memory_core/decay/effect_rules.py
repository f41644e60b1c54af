"""Effect-aware decay: what the measured effect of a card (memory_core.effects) does to it.

* **harms** (rule 3): the namespace's Benjamini-Hochberg test rejects "no harm" at the
  configured false discovery rate (memory_core.effects.fdr; with fdr 0, the interval of
  served - withheld lies below zero): the card goes to review, out of retrieval, whatever its
  confidence; the reason carries its p and q.
* **fade** (rule 4): the interval lies within +-margin (enough evidence the card changes
  nothing): its confidence is multiplied by `fade`, at most once a night.
* a card proven to **help** is evicted last by the cap (plan.plan_cap ranks it first).

Cards without enough outcomes in both arms are left to the +0.05/-0.1 feedback rule and time
decay. Each rule is one INSERT…SELECT over all cards, as the others; the reason written to the
card's history carries the numbers (rates, uses per arm, difference, interval).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    MetaData,
    Table,
    Text,
    Uuid,
    and_,
    case,
    delete,
    exists,
    false,
    func,
    insert,
    literal,
    or_,
    select,
)
from sqlalchemy.engine import Connection

from memory_core.decay.params import DecayParams
from memory_core.decay.plan_table import CARD, PLAN, after_decay, scope
from memory_core.decay.sql import ts
from memory_core.decay.tiers import idle_since
from memory_core.effects.fdr import harms_tests
from memory_core.effects.sql import EffectSQL, effect_sql, why
from memory_core.models.card import CardStatus
from memory_core.settings import EffectRules

REVIEW = CardStatus.review.value


def card_effect(rules: EffectRules) -> EffectSQL:
    """The estimate over the card table's arm counts."""
    c = CARD.c
    return effect_sql(
        served=c.served_outcomes,
        served_ok=c.served_successes,
        withheld=c.withheld_outcomes,
        withheld_ok=c.withheld_successes,
        rules=rules,
    )


def protected(rules: EffectRules) -> Any:
    """1 for a card proven to help (the cap evicts it last), else 0."""
    if not rules.aware:
        return literal(0)
    return case((card_effect(rules).helps(), literal(1)), else_=literal(0))


# the harmful cards of this run and each one's test, as text: a temporary table, since a
# bound parameter per card (`IN`, `CASE`) passes SQLite's and psycopg's limits (32,766 and
# 65,535) at some ten thousand harmful cards
HARMS = Table(
    "decay_harms",
    MetaData(),  # not the models' metadata: Alembic must never see it
    Column("card_id", Uuid(), primary_key=True),
    Column("test", Text, nullable=False),
    prefixes=["TEMPORARY"],
)


def harms_of(conn: Connection, *, rules: EffectRules, ns: str | None, e: EffectSQL) -> Any:
    """Which cards harm (SQL), and each harmful card's test as reason text: the namespace's
    Benjamini-Hochberg test (memory_core.effects.fdr), or with fdr 0 the interval alone."""
    if rules.fdr <= 0:
        return e.high < 0, literal("")
    tests = harms_tests(conn, rules=rules, namespaces=None if ns is None else [ns])
    rows = [
        {
            "card_id": cid,
            "test": f"; harms p={t.p:.3g}, Benjamini-Hochberg q={t.q:.3g}"
            f" over {t.tested} cards (fdr {rules.fdr:g})",
        }
        for cid, t in tests.items()
        if t.harms
    ]
    if not rows:
        return false(), literal("")
    # created and dropped inside the run's transaction (plan_effects): a failed run leaves none
    HARMS.create(conn)
    conn.execute(insert(HARMS), rows)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("ANALYZE decay_harms")  # temporary: no autovacuum statistics
    h = HARMS.alias("h")
    test = select(h.c.test).where(h.c.card_id == CARD.c.card_id).scalar_subquery()
    return CARD.c.card_id.in_(select(HARMS.c.card_id)), func.coalesce(test, literal(""))


def plan_effects(conn: Connection, *, params: DecayParams, now: datetime, ns: str | None) -> None:
    """Rules 3 and 4 in one pass over the cards (each pass joins the whole plan so far):
    an active card that confidently harms goes to review (rule "harms"); one with enough
    evidence of no effect fades (x fade), once a night (rule "fade"). A fade row replaces the
    card's time-decay row and carries that decay."""
    rules = params.effects
    e = card_effect(rules)
    joined, (conf, tier, decayed) = after_decay()
    c = CARD.c
    text = why(
        conn.dialect.name, e, served=c.served_outcomes, withheld=c.withheld_outcomes, rules=rules
    )
    harms, tested = harms_of(conn, rules=rules, ns=ns, e=e)
    again = ts(now - timedelta(hours=rules.refade_hours))
    # not archived as unused: rule 2's own predicate, negated. An anti-join against the plan
    # table (no statistics yet) let PostgreSQL pick a nested loop: 1.1e9 comparisons, 150 s at
    # 300k cards; and the plan is analysed before this join for the same reason
    staying = idle_since() > ts(now - timedelta(days=params.archive_after_days))
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("ANALYZE decay_plan")
    rows = (
        select(
            c.card_id,
            c.namespace,
            case((harms, literal("harms")), else_=literal("fade")),
            c.confidence,
            case((harms, conf), else_=conf * rules.fade),
            c.status,
            case((harms, literal(REVIEW)), else_=c.status),
            c.decay_tier,
            tier,
            c.version + 1,
            idle_since(),
            literal(None, Float),
            decayed
            + case(
                (harms, literal("effect: harms, sent to review: ")),
                else_=literal(
                    f"effect: none beyond +-{rules.margin:g}, confidence x{rules.fade:g}: "
                ),
            )
            + text
            + tested,
            c.version,
            c.use_count,
        )
        .select_from(joined)
        .where(
            *scope(ns),
            e.enough,
            or_(
                harms,
                and_(
                    e.no_effect(rules.margin),
                    or_(c.effect_faded_at.is_(None), c.effect_faded_at <= again),
                ),
            ),
            staying,
        )
    )
    conn.execute(insert(PLAN).from_select(list(PLAN.c.keys()), rows))
    HARMS.drop(conn, checkfirst=True)
    f = PLAN.alias("f")
    faded = exists().where(f.c.card_id == PLAN.c.card_id, f.c.rule == "fade")
    conn.execute(delete(PLAN).where(PLAN.c.rule == "decay", faded))
