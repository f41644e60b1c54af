"""Effect-aware decay: what the measured effect of a card (memory_core.effects) does to it.

* **harms** (rule 3): the interval of served - withheld lies below zero: the card goes to
  review, out of retrieval, whatever its confidence.
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

from sqlalchemy import Float, case, delete, exists, insert, literal, or_, select
from sqlalchemy.engine import Connection

from memory_core.decay.params import DecayParams
from memory_core.decay.plan_table import CARD, PLAN, after_decay, scope
from memory_core.decay.sql import ts
from memory_core.decay.tiers import idle_since
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


def _not_leaving() -> Any:
    u = PLAN.alias("u")
    return ~exists().where(u.c.card_id == CARD.c.card_id, u.c.rule.in_(("unused", "harms")))


def plan_harms(conn: Connection, *, params: DecayParams, ns: str | None) -> None:
    """Rule 3: an active card that confidently harms goes to review."""
    rules = params.effects
    e = card_effect(rules)
    joined, (conf, tier, decayed) = after_decay()
    c = CARD.c
    text = why(
        conn.dialect.name, e, served=c.served_outcomes, withheld=c.withheld_outcomes, rules=rules
    )
    rows = (
        select(
            c.card_id,
            c.namespace,
            literal("harms"),
            c.confidence,
            conf,
            c.status,
            literal(REVIEW),
            c.decay_tier,
            tier,
            c.version + 1,
            idle_since(),
            literal(None, Float),
            decayed + literal("effect: harms, sent to review: ") + text,
            c.version,
            c.use_count,
        )
        .select_from(joined)
        .where(*scope(ns), e.harms(), _not_leaving())
    )
    conn.execute(insert(PLAN).from_select(list(PLAN.c.keys()), rows))


def plan_fade(conn: Connection, *, params: DecayParams, now: datetime, ns: str | None) -> None:
    """Rule 4: an active card with enough evidence of no effect fades (x fade), once a night;
    its fade row replaces its time-decay row (and carries that decay)."""
    rules = params.effects
    e = card_effect(rules)
    joined, (conf, tier, decayed) = after_decay()
    c = CARD.c
    text = why(
        conn.dialect.name, e, served=c.served_outcomes, withheld=c.withheld_outcomes, rules=rules
    )
    again = ts(now - timedelta(hours=rules.refade_hours))
    rows = (
        select(
            c.card_id,
            c.namespace,
            literal("fade"),
            c.confidence,
            conf * rules.fade,
            c.status,
            c.status,
            c.decay_tier,
            tier,
            c.version + 1,
            idle_since(),
            literal(None, Float),
            decayed
            + literal(f"effect: none beyond +-{rules.margin:g}, confidence x{rules.fade:g}: ")
            + text,
            c.version,
            c.use_count,
        )
        .select_from(joined)
        .where(
            *scope(ns),
            e.no_effect(rules.margin),
            or_(c.effect_faded_at.is_(None), c.effect_faded_at <= again),
            _not_leaving(),
        )
    )
    conn.execute(insert(PLAN).from_select(list(PLAN.c.keys()), rows))
    f = PLAN.alias("f")
    faded = exists().where(f.c.card_id == PLAN.c.card_id, f.c.rule == "fade")
    conn.execute(delete(PLAN).where(PLAN.c.rule == "decay", faded))
