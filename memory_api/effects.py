"""Routes of the holdout: a run's outcome for its query, pins, the effects report."""

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query

from memory_api.responses import COMMON, CONFLICT, NOT_FOUND
from memory_core.effects.outcomes import QueryOutcome
from memory_core.effects.report import EffectsReport
from memory_core.models.card import CardPublic
from memory_core.serve.schemas import OutcomeRequest, PinRequest
from memory_core.serve.service import MemoryService


def effects_router(service: MemoryService, caller: Any) -> APIRouter:
    """The routes over the service; `caller` is the app's authenticated-principal dependency."""
    # documented here: FastAPI includes a router lazily, past document_answers' reach
    r = APIRouter(tags=["effects"], responses={**COMMON, **NOT_FOUND})
    post = {**CONFLICT}

    @r.post("/v1/uses/{query_id}/outcome", responses=post)
    def report_outcome(query_id: uuid.UUID, body: OutcomeRequest, who: caller) -> QueryOutcome:
        """The outcome of the run that made a query (its `query_id`): counts for every card
        it served (with the +0.05/-0.1 rule) and every card the holdout withheld from it."""
        return service.report_outcome(principal=who, query_id=query_id, request=body)

    @r.post("/v1/cards/{card_id}/pin", responses=post)
    def pin_card(card_id: uuid.UUID, body: PinRequest, who: caller) -> CardPublic:
        """Pin a card so the holdout never withholds it, or unpin it (admin)."""
        return service.pin(principal=who, card_id=card_id, pinned=body.pinned)

    @r.get("/v1/effects")
    def effects(
        who: caller,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    ) -> EffectsReport:
        """Cards by measured effect (served against withheld), worst first."""
        return service.effects(principal=who, limit=limit)

    return r
