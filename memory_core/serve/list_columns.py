"""The card list's tool column and the fact list's key and value, read for the page's ids only
(the list query leaves these columns out: sorting whole rows cost most of a page).

Layer: service.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.db import read_session
from memory_core.models.card import Card


def page_tools(
    *, engine: Engine, namespace: str, card_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[str]]:
    """Each card's tools in the order its actions call them, each once."""
    if not card_ids:
        return {}
    with read_session(engine) as session:
        rows = session.execute(
            select(col(Card.card_id), col(Card.action_sequence)).where(
                col(Card.card_id).in_(list(card_ids)), col(Card.namespace) == namespace
            )
        ).all()
    out: dict[uuid.UUID, list[str]] = {}
    for card_id, steps in rows:
        tools = [s.get("tool") for s in steps or [] if isinstance(s, dict)]
        out[card_id] = list(dict.fromkeys(t for t in tools if isinstance(t, str) and t))
    return out


def page_facts(
    *, engine: Engine, namespace: str, card_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Any]:
    """Each listed fact's key, question, value, expiry and standing (a row of these)."""
    if not card_ids:
        return {}
    cols = (Card.key, Card.query, Card.value, Card.valid_until, Card.standing)
    with read_session(engine) as session:
        rows = session.execute(
            select(col(Card.card_id), *(col(c) for c in cols)).where(
                col(Card.card_id).in_(list(card_ids)), col(Card.namespace) == namespace
            )
        ).all()
    return {r.card_id: r for r in rows}
