"""Cards as a table the expectation suite checks: one row a card, derived columns for each rule."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import String, Text, cast

from memory_core.errors import InvalidPrecondition
from memory_core.everywhere import EVERYWHERE, holds_everywhere
from memory_core.models.card import Card
from memory_core.preconditions import MAX_PRECONDITIONS, compile_all
from memory_core.redact import has_secret

if TYPE_CHECKING:  # pandas costs ~0.5 s to import: only a run with drafts pays it
    import pandas as pd

TEXT_FIELDS = ("scenario", "expected_outcome", "actual_outcome")
JSON_FIELDS = ("action_sequence", "preconditions", "failure_modes")


def draft_columns() -> tuple[Any, ...]:
    """What validation reads of a card; JSON and ids come as text (decoding them all costs more
    than the checks, and most texts repeat)."""
    return (
        cast(Card.card_id, String).label("card_id"),
        Card.scenario,
        Card.expected_outcome,
        Card.actual_outcome,
        Card.confidence,
        *(cast(getattr(Card, f), Text).label(f) for f in JSON_FIELDS),
        Card.key,
        Card.query,
        Card.value,
        Card.version,
        # NULL (falsy) unless its writer meant the card for every state
        Card.provenance[EVERYWHERE].as_boolean().label("everywhere"),
    )


@dataclass(frozen=True, slots=True)
class DraftRow:
    """A card as validation sees it: ids and JSON fields as text."""

    card_id: str
    scenario: str | None
    expected_outcome: str | None
    actual_outcome: str | None
    confidence: float | None
    action_sequence: str
    preconditions: str
    failure_modes: str
    key: str | None = None
    query: str | None = None
    value: str | None = None
    version: int = 1
    everywhere: bool | None = False  # its writer meant it for every state (memory_core.everywhere)


def draft_row(card: Card) -> DraftRow:
    """A card object in the shape validation reads from the database."""
    return DraftRow(
        card_id=str(card.card_id),
        scenario=card.scenario,
        expected_outcome=card.expected_outcome,
        actual_outcome=card.actual_outcome,
        confidence=card.confidence,
        action_sequence=json.dumps(card.action_sequence),
        preconditions=json.dumps(card.preconditions),
        failure_modes=json.dumps(card.failure_modes),
        key=card.key,
        query=card.query,
        value=card.value,
        version=card.version,
        everywhere=bool((card.provenance or {}).get(EVERYWHERE)),
    )


@lru_cache(maxsize=65536)
def _expression_compiles(expression: str) -> bool:
    try:
        compile_all([expression])
    except InvalidPrecondition:
        return False
    return True


@lru_cache(maxsize=65536)
def _compiles(preconditions_json: str) -> bool:
    # cards share expressions more than whole lists: each distinct expression compiles once
    try:
        expressions = json.loads(preconditions_json)
    except ValueError:
        return False
    if not isinstance(expressions, list) or len(expressions) > MAX_PRECONDITIONS:
        return False
    return all(isinstance(e, str) and _expression_compiles(e) for e in expressions)


@lru_cache(maxsize=65536)
def _picks_states(preconditions_json: str) -> bool:
    """False when the preconditions hold on every state (a card for every query)."""
    try:
        expressions = json.loads(preconditions_json)
        return holds_everywhere(expressions) is None
    except (ValueError, TypeError, InvalidPrecondition):
        return True  # what does not compile is the other rule's business


@lru_cache(maxsize=65536)
def _tools(actions_json: str) -> tuple[Any, ...]:
    try:
        actions = json.loads(actions_json)
    except ValueError:
        return ()
    if not isinstance(actions, list):
        return ()
    return tuple(a.get("tool") if isinstance(a, dict) else None for a in actions)


def cards_frame(
    cards: Sequence[DraftRow | Any], *, registry: frozenset[str] | None = None
) -> pd.DataFrame:
    """The table of a batch of cards: rows of draft_columns(), DraftRows, or Card objects."""
    import pandas as pd

    return pd.DataFrame(card_columns(cards, registry=registry), columns=FRAME_COLUMNS)


def card_columns(
    cards: Sequence[DraftRow | Any], *, registry: frozenset[str] | None = None
) -> dict[str, list[Any]]:
    """The columns of cards_frame as plain lists: what a card written alone is checked on
    (memory_core.validate.rows), with no frame to build."""
    rows = [draft_row(c) if isinstance(c, Card) else c for c in cards]
    tools = [_tools(r.action_sequence) for r in rows]
    scenarios = [r.scenario or "" for r in rows]
    return {
        "card_id": [r.card_id for r in rows],
        "scenario": [s.strip() or None for s in scenarios],
        "scenario_chars": [len(s) for s in scenarios],
        "expected_outcome_chars": [len(r.expected_outcome or "") for r in rows],
        "actual_outcome_chars": [len(r.actual_outcome or "") for r in rows],
        "confidence": [r.confidence for r in rows],
        "actions": [len(t) for t in tools],
        "actions_name_a_tool": [all(isinstance(x, str) and x.strip() for x in t) for t in tools],
        "preconditions_compile": [_compiles(r.preconditions) for r in rows],
        # a fact is found by its words, not by preconditions
        "preconditions_pick_states": [
            r.everywhere or r.key is not None or _picks_states(r.preconditions) for r in rows
        ],
        # an empty tool name is the other rule's business
        "tools_in_registry": [
            registry is None or all(x in registry for x in t if x) for t in tools
        ],
        "free_of_secrets": [not has_secret(_text(r)) for r in rows],
    }


def _text(row: DraftRow) -> str:
    """Every free-text field of a card, joined (what the secret scan reads)."""
    return "\n".join(
        (
            row.scenario or "",
            row.expected_outcome or "",
            row.actual_outcome or "",
            row.action_sequence,
            row.failure_modes,
            row.key or "",
            row.query or "",
            row.value or "",
        )
    )


FRAME_COLUMNS = [
    "card_id",
    "scenario",
    "scenario_chars",
    "expected_outcome_chars",
    "actual_outcome_chars",
    "confidence",
    "actions",
    "actions_name_a_tool",
    "preconditions_compile",
    "preconditions_pick_states",
    "tools_in_registry",
    "free_of_secrets",
]
