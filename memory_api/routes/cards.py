"""Cards: query and check (the hot reads), list, one card, its history, and storing one."""

from __future__ import annotations

from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Query, Request, status
from fastapi.responses import Response

from memory_api.routes.deps import Caller, CardId, ServiceDep
from memory_core.effects.cards import judged_all
from memory_core.models.card import CardPublic
from memory_core.serve.reads import MAX_OFFSET
from memory_core.serve.schemas import (
    CardIn,
    CheckActionRequest,
    CheckActionResult,
    HistoryEntry,
    QueryRequest,
    QueryResult,
)
from memory_core.serve.service import MemoryService

router = APIRouter(tags=["cards"])


@router.post("/v1/cards/query", response_model=QueryResult)
async def query_cards(body: QueryRequest, who: Caller, request: Request) -> Response:
    """Cards whose preconditions hold on the task state, best first; with `explain`, each
    precondition's verdict and the score terms; with `prompt_tokens`, a prompt block."""
    # the hot route: the served rows' JSON joined once (no second validation against the
    # response model, which documents the same shape). A warm plain query that has been quick
    # is answered here (memory_core/serve/inline.py: the thread hop cost more than it); any
    # other runs in a worker thread, as a snapshot load or an explain must never hold the
    # event loop and every other request behind it (at 100k cards a health check waited 8 s)
    service: MemoryService = request.app.state.service  # ServiceDep: one more dependency solve
    answer = service.query_json_now(principal=who, request=body)
    if answer is None:
        answer = await to_thread.run_sync(lambda: service.query_json(principal=who, request=body))
    return Response(answer, media_type="application/json")


@router.post("/v1/cards/check", response_model=CheckActionResult)
async def check_action(body: CheckActionRequest, who: Caller, request: Request) -> Response:
    """Before a call: the cards keyed on this tool and arguments, and their failure modes."""
    # the JSON written once, as the query route's (the response model documents the shape)
    service: MemoryService = request.app.state.service
    answer = await to_thread.run_sync(
        lambda: service.check_action_json(principal=who, request=body)
    )
    return Response(answer, media_type="application/json")


@router.get("/v1/cards")
def list_cards(
    who: Caller,
    service: ServiceDep,
    status_: Annotated[list[str] | None, Query(alias="status")] = None,
    kind: Annotated[str | None, Query(pattern="^(experience|fact)$")] = None,
    q: Annotated[str | None, Query(max_length=200, description="scenario contains")] = None,
    min_confidence: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> list[CardPublic]:
    """Cards of the key's namespace, most recently updated first."""
    cards = service.list_cards(
        principal=who,
        statuses=status_,
        kind=kind,
        text=q,
        min_confidence=min_confidence,
        limit=limit,
        offset=offset,
    )
    return judged_all(cards, engine=service.engine, rules=service.settings.decay.effects)


@router.get("/v1/cards/recent")
def recent_cards(
    who: Caller, service: ServiceDep, limit: Annotated[int, Query(ge=1, le=200)] = 10
) -> list[CardPublic]:
    """The most recently changed active cards."""
    cards = service.recent(principal=who, limit=limit)
    return judged_all(cards, engine=service.engine, rules=service.settings.decay.effects)


@router.get("/v1/cards/{card_id}")
def get_card(card_id: CardId, who: Caller, service: ServiceDep) -> CardPublic:
    """One card with its evidence; its effect judged by the configured rules."""
    return service.get_card(principal=who, card_id=card_id)


@router.get("/v1/cards/{card_id}/history")
def card_history(card_id: CardId, who: Caller, service: ServiceDep) -> list[HistoryEntry]:
    """Every version of a card: what changed, who changed it, why."""
    return service.history(principal=who, card_id=card_id)


@router.post("/v1/cards", status_code=status.HTTP_201_CREATED)
def store_card(body: CardIn, who: Caller, service: ServiceDep) -> CardPublic:
    """Store a card (write scope): validated like nightly drafts, marked operator-written."""
    return service.store_card(principal=who, card=body, via="api")
