"""A card's effect under the configured rules: for one card (its page), for a page of cards
(the list's column), and as a list filter (SQL, memory_core.effects.sql). The harms verdict
is its namespace's (memory_core.effects.fdr): every reader gets it from here."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import and_, not_, or_, select
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col

from memory_core.db import READ_ONLY, read_session
from memory_core.effects.estimate import Effect, HarmsTest, Verdict, estimate
from memory_core.effects.fdr import harms_tests
from memory_core.effects.sql import effect_sql
from memory_core.errors import InvalidInput
from memory_core.models.card import Card, CardPublic
from memory_core.settings import EffectRules


class Counted(Protocol):
    """Anything carrying a card's outcome counts per arm."""

    served_uses: int
    served_successes: int
    withheld_uses: int
    withheld_successes: int


def rescored(effect: Counted, rules: EffectRules, harms: HarmsTest | None) -> Effect:
    """The same counts judged by these rules and the card's test within its namespace."""
    return estimate(
        served_uses=effect.served_uses,
        served_successes=effect.served_successes,
        withheld_uses=effect.withheld_uses,
        withheld_successes=effect.withheld_successes,
        rules=rules,
        harms=harms,
    )


def tests_for(
    *, engine: Engine, namespaces: Sequence[str], rules: EffectRules
) -> dict[uuid.UUID, HarmsTest]:
    """The harms tests of these namespaces' cards (one query)."""
    if rules.fdr <= 0 or not namespaces:
        return {}
    with engine.connect().execution_options(**READ_ONLY) as conn:
        return harms_tests(conn, rules=rules, namespaces=namespaces)


def judged_all(
    cards: Sequence[CardPublic], *, engine: Engine, rules: EffectRules
) -> list[CardPublic]:
    """The cards with their effects judged by these rules, each within its namespace."""
    counted = [c for c in cards if c.effect is not None]
    tests = tests_for(engine=engine, namespaces=sorted({c.namespace for c in counted}), rules=rules)
    return [
        c
        if c.effect is None
        else c.model_copy(update={"effect": rescored(c.effect, rules, tests.get(c.card_id))})
        for c in cards
    ]


def judged(card: CardPublic, *, engine: Engine, rules: EffectRules) -> CardPublic:
    """The card with its effect judged by these rules, within its namespace."""
    return judged_all([card], engine=engine, rules=rules)[0]


def effects_of(
    *, engine: Engine, namespace: str, card_ids: Sequence[uuid.UUID], rules: EffectRules
) -> dict[uuid.UUID, Effect]:
    """The effect of each listed card of this namespace (one query for a page of cards)."""
    if not card_ids:
        return {}
    q = select(
        col(Card.card_id),
        col(Card.served_outcomes),
        col(Card.served_successes),
        col(Card.withheld_outcomes),
        col(Card.withheld_successes),
        col(Card.namespace),
    ).where(col(Card.card_id).in_(list(card_ids)))
    tests = tests_for(engine=engine, namespaces=[namespace], rules=rules)
    with read_session(engine) as session:
        # by primary key alone: with the namespace in the WHERE, SQLite (no statistics) read
        # the whole namespace through its (namespace, status) index, 90 ms at 100k cards
        rows = [r for r in session.execute(q).all() if r.namespace == namespace]
    return {
        r.card_id: estimate(
            served_uses=r.served_outcomes,
            served_successes=r.served_successes,
            withheld_uses=r.withheld_outcomes,
            withheld_successes=r.withheld_successes,
            rules=rules,
            harms=tests.get(r.card_id),
        )
        for r in rows
    }


def verdict_filter(
    verdict: str, rules: EffectRules, harm_ids: Sequence[uuid.UUID] = ()
) -> ColumnElement[bool]:
    """Cards whose verdict under these rules is `verdict` (the SQL twin of estimate's judge);
    with `rules.fdr`, the harmful are `harm_ids` (memory_core.effects.fdr.harm_ids)."""
    try:
        v = Verdict(verdict)
    except ValueError as exc:
        names = ", ".join(x.value for x in Verdict)
        raise InvalidInput(f"effect must be one of {names}", field="effect") from exc
    e = effect_sql(
        served=col(Card.served_outcomes),
        served_ok=col(Card.served_successes),
        withheld=col(Card.withheld_outcomes),
        withheld_ok=col(Card.withheld_successes),
        rules=rules,
    )
    # judge's order: harms, helps, then no effect; the rest is unclear. Without enough
    # outcomes each test is `false AND ...`, false in SQL even where the arithmetic is NULL
    harms = e.harms() if rules.fdr <= 0 else and_(e.enough, col(Card.card_id).in_(harm_ids))
    helps = e.helps()  # exclusive with harms: a harmful card's difference is below 0
    none = and_(e.no_effect(rules.margin), not_(helps), not_(harms))
    chosen = {
        Verdict.harms: harms,
        Verdict.helps: helps,
        Verdict.no_effect: none,
        Verdict.unclear: not_(or_(harms, helps, none)),
    }
    return chosen[v]


def verdict_counts(*, engine: Engine, namespace: str, rules: EffectRules) -> dict[str, int]:
    """Active cards of a namespace by effect verdict, judged by the list filter's own SQL so
    the overview and a filtered list agree. Only cards with enough outcomes in both arms can
    be judged: the verdicts are summed over those alone (a few, against 100k cards whose
    interval arithmetic took PostgreSQL seconds), the rest are unclear."""
    from sqlalchemy import case, func

    from memory_core.effects.fdr import harm_ids

    harmful = harm_ids(tests_for(engine=engine, namespaces=[namespace], rules=rules))
    judged = [v for v in Verdict if v is not Verdict.unclear]
    sums = [func.sum(case((verdict_filter(v.value, rules, harmful), 1), else_=0)) for v in judged]
    live = (col(Card.namespace) == namespace, col(Card.status) == "active")
    enough = and_(
        col(Card.served_outcomes) >= rules.min_served,
        col(Card.withheld_outcomes) >= rules.min_withheld,
    )
    with read_session(engine) as session:
        total = int(session.execute(select(func.count()).where(*live)).scalar_one())
        row = session.execute(select(*sums).where(*live, enough)).one()
    out = {v.value: int(n or 0) for v, n in zip(judged, row, strict=True)}
    return {v.value: out.get(v.value, total - sum(out.values())) for v in Verdict}
