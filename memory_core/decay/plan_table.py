"""The decay plan's temporary table and what every rule reads: the cards in scope and each
card as the modifying rules (time decay, the no-effect fade) leave it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    Uuid,
    and_,
    func,
)
from sqlalchemy.sql.elements import ColumnElement

from memory_core.models.card import Card, CardStatus
from memory_core.models.columns import UTCDateTime

# rules that change a card and keep it active; a card has at most one such row (see
# effect_rules.plan_fade), and a row of a leaving rule replaces it at the end
MODIFYING = ("decay", "fade")

PLAN = Table(
    "decay_plan",
    MetaData(),  # not the models' metadata: Alembic must never see it
    Column("card_id", Uuid(), nullable=False),
    Column("namespace", String(128), nullable=False),
    Column("rule", String(8), nullable=False),
    Column("confidence_before", Float, nullable=False),
    Column("confidence_after", Float, nullable=False),
    Column("status_before", String(16), nullable=False),
    Column("status_after", String(16), nullable=False),
    Column("tier_before", Integer, nullable=False),
    Column("tier_after", Integer, nullable=False),
    Column("version_after", Integer, nullable=False),
    Column("idle_since", UTCDateTime(), nullable=False),
    Column("score", Float, nullable=True),
    Column("reason", Text, nullable=False),
    # the card as planned: apply changes only cards still in this state (see stage._guard)
    Column("version_before", Integer, nullable=False),
    Column("uses_before", Integer, nullable=False),
    prefixes=["TEMPORARY"],
)
# SQLite joins through an index; PostgreSQL hash-joins, and keeping an index up over random
# card ids cost it ~5 s of 40 on a million cards
SQLITE_INDEX = "CREATE INDEX ix_decay_plan_card_rule ON decay_plan (card_id, rule)"
CARD: Table = Card.__table__  # type: ignore[attr-defined]
ACTIVE = CardStatus.active.value
ARCHIVED = CardStatus.archived.value


def scope(namespace: str | None) -> list[ColumnElement[bool]]:
    """Active cards, of one namespace or all."""
    where = [CARD.c.status == ACTIVE]
    if namespace is not None:
        where.append(CARD.c.namespace == namespace)
    return where


def after_decay() -> tuple[Any, list[Any]]:
    """The plan's modifying rows (time decay, the no-effect fade) joined to the cards: each
    card as those leave it (confidence, tier, and their reason to prefix a later one with)."""
    d = PLAN.alias("d")
    joined = CARD.outerjoin(d, and_(d.c.card_id == CARD.c.card_id, d.c.rule.in_(MODIFYING)))
    now_state = [
        func.coalesce(d.c.confidence_after, CARD.c.confidence),
        func.coalesce(d.c.tier_after, CARD.c.decay_tier),
        func.coalesce(d.c.reason + "; ", ""),
    ]
    return joined, now_state
