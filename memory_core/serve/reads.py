"""The reading half of the service: one card, listings, recent cards, a card's history.

Layer: service.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.cards.query import get_card as _get_card
from memory_core.cards.query import list_cards as _list_cards
from memory_core.cards.query import to_public
from memory_core.db import read_session
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.card import Card, CardPublic, CardVersion
from memory_core.redact.fields import redact, redact_fields
from memory_core.serve.keys import Principal
from memory_core.serve.schemas import HistoryEntry
from memory_core.settings import Settings

MAX_PAGE = 200  # cards per listed page
# past any store's size, and well inside the databases' 64-bit integers (a 20-digit offset
# overflowed the driver: a 500 where the caller's input was at fault)
MAX_OFFSET = 1_000_000_000


class CardHistory(NamedTuple):
    """A card as readers see it and every version of it, oldest first, redacted."""

    card: CardPublic
    versions: list[HistoryEntry]


def card_history(
    *, engine: Engine, card_id: uuid.UUID, namespace: str | None = None
) -> CardHistory:
    """The one read of a card's history (the API, the MCP server and the CLI): the card and
    its versions with reasons and snapshots redacted. `namespace` None is the operator's
    view (any namespace); otherwise a card outside it is not found."""
    with read_session(engine) as session:
        card = session.get(Card, card_id)
        if card is None or (namespace is not None and card.namespace != namespace):
            where = "" if namespace is None else f" in namespace {namespace!r}"
            raise NotFound(f"no card {card_id}{where}")
        versions = session.execute(
            select(CardVersion)
            .where(col(CardVersion.card_id) == card_id)
            .order_by(col(CardVersion.version), col(CardVersion.created_at))
        ).scalars()
        return CardHistory(
            card=to_public(card),
            versions=[
                HistoryEntry(
                    version=v.version,
                    reason=redact(v.reason),
                    actor=v.actor,
                    created_at=v.created_at,
                    snapshot=redact_fields(v.snapshot),
                )
                for v in versions
            ],
        )


class ReadOperations:
    """Reads of the caller's namespace; each checks the key's read scope."""

    engine: Engine
    settings: Settings

    def get_card(self, *, principal: Principal, card_id: uuid.UUID) -> CardPublic:
        """One card of the caller's namespace, with its evidence and its effect judged by the
        configured rules within its namespace."""
        principal.require("read")
        with read_session(self.engine) as session:
            return _get_card(
                session=session,
                namespace=principal.namespace,
                card_id=card_id,
                rules=self.settings.decay.effects,
            )

    def list_cards(
        self,
        *,
        principal: Principal,
        statuses: Sequence[str] | None = None,
        kind: str | None = None,
        text: str | None = None,
        min_confidence: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[CardPublic]:
        """Cards of the caller's namespace, most recently updated first."""
        principal.require("read")
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be 1..{MAX_PAGE}", field="limit")
        if not 0 <= offset <= MAX_OFFSET:
            raise InvalidInput(f"offset must be 0..{MAX_OFFSET}", field="offset")
        with read_session(self.engine) as session:
            cards = _list_cards(
                session=session,
                namespace=principal.namespace,
                statuses=statuses,
                kind=kind,
                text=text,
                min_confidence=min_confidence,
                limit=limit,
                offset=offset,
            )
        return [to_public(c) for c in cards]

    def recent(self, *, principal: Principal, limit: int = 10) -> list[CardPublic]:
        """The most recently changed active cards."""
        return self.list_cards(principal=principal, statuses=["active"], limit=limit)

    def history(self, *, principal: Principal, card_id: uuid.UUID) -> list[HistoryEntry]:
        """Every version of a card, oldest first: what changed, who, why."""
        principal.require("read")
        return card_history(
            engine=self.engine, card_id=card_id, namespace=principal.namespace
        ).versions
