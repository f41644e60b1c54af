"""The facts a namespace held true at a past moment, read from their versions: each version
that names a status says what the fact was from then on (stored, superseded, forgotten)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from memory_core.errors import InvalidInput
from memory_core.models.card import Card, CardKind, CardStatus, CardVersion


def facts_as_of(session: Session, *, namespace: str, at: datetime) -> list[Card]:
    """The namespace's facts that were active at `at` and not yet expired then."""
    cards = {
        c.card_id: c
        for c in session.execute(
            select(Card).where(
                col(Card.namespace) == namespace,
                col(Card.kind) == CardKind.fact.value,
                col(Card.created_at) <= at,
            )
        ).scalars()
    }
    versions = session.execute(
        select(col(CardVersion.card_id), col(CardVersion.created_at), col(CardVersion.snapshot))
        .join(Card, col(Card.card_id) == col(CardVersion.card_id))
        .where(col(Card.namespace) == namespace, col(Card.kind) == CardKind.fact.value)
        .order_by(col(CardVersion.card_id), col(CardVersion.version))
    ).all()
    status: dict[object, str | None] = {}
    for card_id, created_at, snapshot in versions:
        if card_id not in cards:
            continue
        status.setdefault(card_id, None)
        if created_at <= at and "status" in (snapshot or {}):
            status[card_id] = snapshot["status"]
    out = []
    for card_id, card in cards.items():
        # a fact without any version row (written before versions were kept): its status now
        held = status.get(card_id, card.status)
        if held != CardStatus.active.value:
            continue
        if card.valid_until is not None and card.valid_until <= at:
            continue
        out.append(card)
    return out


def parse_as_of(text: str) -> datetime:
    """A date or date and time (ISO 8601; without a zone, UTC) as an aware UTC datetime."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            f"as-of {text!r} is not an ISO date or date and time (2026-12-01, 2026-12-01T09:30Z)",
            field="as_of",
        ) from None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC)
