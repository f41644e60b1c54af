"""Uses: the outcome of a task that used a card, fed back into its confidence."""

from __future__ import annotations

from fastapi import APIRouter

from memory_api.routes.deps import Caller, CardId, ServiceDep
from memory_core.decay.feedback import Feedback
from memory_core.serve.schemas import FeedbackRequest

router = APIRouter(tags=["cards"])


@router.post("/v1/cards/{card_id}/feedback")
def feedback(card_id: CardId, body: FeedbackRequest, who: Caller, service: ServiceDep) -> Feedback:
    """The outcome of a task that used the card (+0.05 success, -0.1 failure)."""
    return service.feedback(principal=who, card_id=card_id, request=body)
