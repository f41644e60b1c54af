"""Cards as a table the expectation suite checks: one row a card, derived columns for each rule."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import pandas as pd

from memory_core.errors import InvalidPrecondition
from memory_core.models.card import Card
from memory_core.preconditions import compile_all

# API keys, bearer tokens, private keys, passwords written inline
SECRET = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}"  # OpenAI-style keys
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|xox[abpr]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"  # JWTs
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|(?i:bearer\s+[A-Za-z0-9._\-]{20,})"
    r"|(?i:(?:password|passwd|pwd|secret|api[_-]?key|token)\s*[=:]\s*[^\s,;]{6,})"
)
# the secret regex is slow on long text; only text holding one of these is searched
_SECRET_HINTS = (
    "sk-",
    "akia",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "xox",
    "eyj",
    "private key",
    "bearer",
    "passw",
    "pwd",
    "secret",
    "key",
    "token",
)
TEXT_FIELDS = ("scenario", "expected_outcome", "actual_outcome")
# what validation reads of a card (loading only these is 5x faster than whole ORM objects)
CARD_COLUMNS: tuple[Any, ...] = (
    Card.card_id,
    Card.scenario,
    Card.expected_outcome,
    Card.actual_outcome,
    Card.confidence,
    Card.action_sequence,
    Card.preconditions,
    Card.failure_modes,
    Card.key,
    Card.query,
    Card.value,
    Card.provenance,
    Card.version,
)


def card_text(card: Any) -> str:
    """Every free-text field of a card, joined (what the secret scan reads)."""
    parts: list[str] = [getattr(card, f) or "" for f in TEXT_FIELDS]
    parts += [json.dumps(card.action_sequence), json.dumps(card.failure_modes)]
    parts += [card.key or "", card.query or "", card.value or ""]
    return "\n".join(parts)


def has_secret(text: str) -> bool:
    """True when the text holds something that looks like a credential."""
    low = text.lower()
    return any(h in low for h in _SECRET_HINTS) and SECRET.search(text) is not None


@lru_cache(maxsize=65536)
def _compiles(preconditions: tuple[str, ...]) -> bool:
    # many cards share their preconditions: check each distinct list once
    try:
        compile_all(preconditions)
    except InvalidPrecondition:
        return False
    return True


def _row(card: Any, registry: frozenset[str] | None) -> dict[str, Any]:
    tools = [a.get("tool") for a in card.action_sequence]
    return {
        "card_id": str(card.card_id),
        "scenario": (card.scenario or "").strip() or None,
        "scenario_chars": len(card.scenario or ""),
        "expected_outcome_chars": len(card.expected_outcome or ""),
        "actual_outcome_chars": len(card.actual_outcome or ""),
        "confidence": card.confidence,
        "actions": len(card.action_sequence),
        "actions_name_a_tool": all(isinstance(t, str) and t.strip() for t in tools),
        "preconditions_compile": _compiles(tuple(card.preconditions)),
        # an empty tool name is the other rule's business
        "tools_in_registry": registry is None or all(t in registry for t in tools if t),
        "free_of_secrets": not has_secret(card_text(card)),
    }


def cards_frame(cards: Sequence[Any], *, registry: frozenset[str] | None = None) -> pd.DataFrame:
    """The table of a batch of cards (Card objects or rows of CARD_COLUMNS)."""
    columns: dict[str, list[Any]] = {name: [] for name in FRAME_COLUMNS}
    for card in cards:
        for name, value in _row(card, registry).items():
            columns[name].append(value)
    return pd.DataFrame(columns, columns=FRAME_COLUMNS)


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
    "tools_in_registry",
    "free_of_secrets",
]
