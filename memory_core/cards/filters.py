"""The card list's filters and orders, one definition for the CLI's `cards list` and the
console's keyset-paged list (memory_core.serve.browse)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Float, String, case, cast, func, literal, literal_column
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col

from memory_core.effects.cards import verdict_filter
from memory_core.errors import InvalidInput
from memory_core.models.card import FIRST_TOOL_SQL, Card, CardStatus
from memory_core.models.columns import UTCDateTime
from memory_core.screen.provenance import Origin
from memory_core.settings import EffectRules

_NEVER = datetime(1970, 1, 1, tzinfo=UTC)  # a card never used sorts as the oldest use
_NO_EFFECT = -2.0  # below every difference (-1..+1): a card without both arms sorts last
_c = Card.__table__.c  # type: ignore[attr-defined]
SORTS: dict[str, Any] = {
    "updated": Card.updated_at,
    "created": Card.created_at,
    "confidence": Card.confidence,
    "uses": Card.use_count,
    # distinct runs among the evidence: the support a reader weighs a card by
    "support": Card.run_count,
    # keyset pages need a value on every row: coalesced, never NULL
    "last_used": func.coalesce(_c.last_used_at, literal(_NEVER, UTCDateTime())),
    "tool": func.coalesce(_c.action_sequence[(0, "tool")].as_string(), ""),
    # served minus withheld success rate, as the effect column shows it
    "effect": case(
        (
            (_c.served_outcomes > 0) & (_c.withheld_outcomes > 0),
            cast(_c.served_successes, Float) / _c.served_outcomes
            - cast(_c.withheld_successes, Float) / _c.withheld_outcomes,
        ),
        else_=literal(_NO_EFFECT, Float()),
    ),
}
TIMES = {"updated", "created", "last_used"}
TEXTS = {"tool"}
MAX_LIMIT = 200


@dataclass(frozen=True, kw_only=True)
class CardFilter:
    """What the card list shows: filters and the order."""

    statuses: tuple[str, ...] = ()
    kind: str | None = None
    text: str | None = None
    min_confidence: float | None = None
    max_confidence: float | None = None
    tool: str | None = None
    origin: str | None = None  # provenance.origin: operator, agent_action, observed, user, llm
    sort: str = "updated"
    descending: bool = True
    effect: str | None = None  # a verdict (memory_core.effects): helps, harms, no_effect, unclear
    effect_rules: EffectRules = field(default_factory=EffectRules)

    def __post_init__(self) -> None:
        bad = set(self.statuses) - {s.value for s in CardStatus}
        if bad:
            raise InvalidInput(f"unknown status {sorted(bad)}", field="status")
        if self.sort not in SORTS:
            raise InvalidInput(f"sort must be one of {sorted(SORTS)}", field="sort")
        if self.origin not in (None, *(o.value for o in Origin)):
            raise InvalidInput(
                f"origin must be one of {', '.join(o.value for o in Origin)}", field="origin"
            )
        if self.kind not in (None, "experience", "fact"):
            raise InvalidInput("kind must be experience or fact", field="kind")
        lo, hi = self.min_confidence, self.max_confidence
        for v, name in ((lo, "min_confidence"), (hi, "max_confidence")):
            if v is not None and not 0.0 <= v <= 1.0:
                raise InvalidInput(f"{name} must be within 0..1", field=name)


def sort_key(sort: str, dialect: str) -> Any:
    """The list's order by `sort`; by tool, the first tool as its index spells it on this
    database (walked in order and stopped at the page: sorting every card's JSON for it made
    the slowest list page, 630 ms on SQLite and 306 ms on PostgreSQL at 100,000 cards)."""
    if sort == "tool" and dialect in FIRST_TOOL_SQL:
        return literal_column(FIRST_TOOL_SQL[dialect])
    return SORTS[sort]


def like_pattern(text: str) -> str:
    """A LIKE pattern matching the text literally (its wildcards escaped)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def names_tool(dialect: str, tool: str) -> ColumnElement[bool]:
    """Cards with a step of this tool: JSONB containment on PostgreSQL (casting every row's
    JSONB to text for LIKE took 240 ms of a list page and doubled the card page at 100,000
    cards), the stored JSON's text elsewhere (both dialects print ": " after a key)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        wanted = cast(literal(orjson.dumps([{"tool": tool}]).decode()), JSONB)
        return col(Card.action_sequence).op("@>")(wanted)
    step = '"tool": ' + orjson.dumps(tool).decode()
    return cast(col(Card.action_sequence), String).like(like_pattern(step), escape="\\")


def card_filters(
    namespace: str, f: CardFilter, *, harm_ids: Sequence[uuid.UUID] = (), dialect: str = ""
) -> list[ColumnElement[bool]]:
    """The WHERE of the list; `harm_ids`: the namespace's harmful cards (effects.fdr);
    `dialect`: the engine's (a tool is matched the way the database reads JSON fastest)."""
    where: list[ColumnElement[bool]] = [col(Card.namespace) == namespace]
    if f.statuses:
        where.append(col(Card.status).in_(list(f.statuses)))
    if f.kind:
        where.append(col(Card.kind) == f.kind)
    if f.text:
        where.append(func.lower(col(Card.scenario)).like(like_pattern(f.text.lower()), escape="\\"))
    if f.min_confidence is not None:
        where.append(col(Card.confidence) >= f.min_confidence)
    if f.max_confidence is not None:
        where.append(col(Card.confidence) <= f.max_confidence)
    if f.tool:
        where.append(names_tool(dialect, f.tool))
    if f.origin:  # typed on every row since migration 0011
        mark = '"origin": ' + orjson.dumps(f.origin).decode()
        where.append(cast(col(Card.provenance), String).like(like_pattern(mark), escape="\\"))
    if f.effect:
        where.append(verdict_filter(f.effect, f.effect_rules, harm_ids))
    return where
