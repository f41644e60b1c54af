"""Pinning: a card an operator wants served every time (a safety warning) is never withheld."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.engine import Engine

from memory_core.db import session_scope
from memory_core.errors import NotFound
from memory_core.models.card import Card, CardVersion
from memory_core.models.columns import utcnow


def set_pinned(
    *,
    engine: Engine,
    namespace: str,
    card_id: uuid.UUID,
    pinned: bool,
    actor: str,
    now: datetime | None = None,
) -> Card:
    """Pin (or unpin) a card: a new version with a history row; a no-op when already so."""
    now = now or utcnow()
    with session_scope(engine) as session:
        card = session.get(Card, card_id, with_for_update=True)
        if card is None or card.namespace != namespace:
            raise NotFound(f"no card {card_id} in namespace {namespace!r}")
        if card.pinned == pinned:
            session.expunge(card)
            return card
        card.pinned = pinned
        card.version += 1
        card.updated_at = now  # the served set changed: snapshots reload
        session.add(card)
        session.add(
            CardVersion(
                card_id=card.card_id,
                version=card.version,
                snapshot={"pinned": pinned},
                reason="pinned: never withheld by the holdout" if pinned else "unpinned",
                actor=actor,
                created_at=now,
            )
        )
        session.flush()
        session.refresh(card)
        session.expunge(card)
        return card
