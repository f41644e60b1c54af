"""Review (admin scope): the cards waiting for a person, approve, reject."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from memory_api.routes.deps import Caller, CardId, ServiceDep
from memory_core.effects.cards import judged, judged_all
from memory_core.models.card import CardPublic
from memory_core.serve.schemas import RejectRequest

router = APIRouter(tags=["review"])


@router.get("/v1/review")
def review_queue(
    who: Caller, service: ServiceDep, limit: Annotated[int, Query(ge=1, le=500)] = 100
) -> list[CardPublic]:
    """Cards waiting for a person (admin scope)."""
    cards = service.review_queue(principal=who, limit=limit)
    return judged_all(cards, engine=service.engine, rules=service.settings.decay.effects)


@router.post("/v1/review/{card_id}/approve")
def approve(card_id: CardId, who: Caller, service: ServiceDep) -> CardPublic:
    """Approve a card in review: it becomes active (admin scope)."""
    card = service.decide(principal=who, card_id=card_id, approve=True, reason=None)
    return judged(card, engine=service.engine, rules=service.settings.decay.effects)


@router.post("/v1/review/{card_id}/reject")
def reject(card_id: CardId, body: RejectRequest, who: Caller, service: ServiceDep) -> CardPublic:
    """Reject a card in review, with the reason (admin scope)."""
    card = service.decide(principal=who, card_id=card_id, approve=False, reason=body.reason)
    return judged(card, engine=service.engine, rules=service.settings.decay.effects)
