"""Effects: a run's outcome for its query (both arms of the holdout), pins, the report."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from memory_api.responses import CONFLICT
from memory_api.routes.deps import Caller, ServiceDep
from memory_core.effects.cards import judged
from memory_core.effects.outcomes import QueryOutcome
from memory_core.effects.report import EffectsReport
from memory_core.models.card import CardPublic
from memory_core.serve.schemas import OutcomeRequest, PinRequest

router = APIRouter(tags=["effects"])


@router.post("/v1/uses/{query_id}/outcome", responses={**CONFLICT})
def report_outcome(
    query_id: uuid.UUID, body: OutcomeRequest, who: Caller, service: ServiceDep
) -> QueryOutcome:
    """The outcome of the run that made a query (its `query_id`): counts for every card
    it served (with the +0.05/-0.1 rule) and every card the holdout withheld from it."""
    return service.report_outcome(principal=who, query_id=query_id, request=body)


@router.post("/v1/cards/{card_id}/pin", responses={**CONFLICT})
def pin_card(card_id: uuid.UUID, body: PinRequest, who: Caller, service: ServiceDep) -> CardPublic:
    """Pin a card so the holdout never withholds it, or unpin it (admin)."""
    card = service.pin(principal=who, card_id=card_id, pinned=body.pinned)
    return judged(card, engine=service.engine, rules=service.settings.decay.effects)


@router.get("/v1/effects")
def effects(
    who: Caller,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> EffectsReport:
    """Cards by measured effect (served against withheld), worst first."""
    return service.effects(principal=who, limit=limit)
