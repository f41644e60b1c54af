"""The read API: FastAPI routes that translate HTTP into MemoryService calls (docs at /docs).

Every route needs `Authorization: Bearer <key>`; the key decides the namespace. Hot routes are
async: the service answers them from memory, so a thread hop would only add latency. What may
take long (loading a namespace's snapshot, `explain`, which checks every card) runs in a worker
thread, so the event loop never waits on it and a health check answers at once.
"""

import gc
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from anyio import to_thread
from fastapi import Body, Depends, FastAPI, Query, status
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import SQLAlchemyError

from memory_api.effects import effects_router
from memory_api.errors import BodyLimit, install_error_handlers
from memory_api.guards import install_guards
from memory_api.metrics import install_metrics
from memory_api.responses import document_answers
from memory_api.ui import mount_console
from memory_core.db import make_engine
from memory_core.decay.feedback import Feedback
from memory_core.errors import InvalidInput
from memory_core.facts.search import FactHit
from memory_core.facts.store import FactIn
from memory_core.models.card import CardPublic
from memory_core.serve.keys import Principal
from memory_core.serve.schemas import (
    CardIn,
    CheckActionRequest,
    CheckActionResult,
    FactSearchRequest,
    FeedbackRequest,
    HistoryEntry,
    IngestResult,
    QueryRequest,
    QueryResult,
    RejectRequest,
)
from memory_core.serve.service import MemoryService
from memory_core.settings import Settings

_bearer = HTTPBearer(auto_error=False, description="an API key from `hindsight keys create`")


def freeze_long_lived() -> None:
    """Move what lives by now (modules, a loaded snapshot) out of the garbage collector's full
    passes: at 5,000 cards each pass scanned ~200k objects and stalled requests ~100 ms, and
    it grows with the cards. Young cycles are collected first; the snapshot has none."""
    gc.collect(1)
    gc.freeze()


def app_from_env() -> FastAPI:
    """The API over a service built from the HINDSIGHT_* settings: uvicorn's factory when it
    runs several worker processes (each holds its own snapshots, key cache and use writer)."""
    settings = Settings()
    return create_app(
        MemoryService(engine=make_engine(settings), settings=settings), freeze_gc=True
    )


def create_app(service: MemoryService, *, freeze_gc: bool = False) -> FastAPI:
    """The API over one service (started and stopped with the app). freeze_gc: the server
    process's long-lived objects leave the collector's full passes (`freeze_long_lived`)."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if freeze_gc:
            service.snapshots.on_load = freeze_long_lived
            freeze_long_lived()
        service.start()
        try:
            yield
        finally:
            service.close()

    app = FastAPI(
        title="Hindsight",
        summary="Experience cards and facts for LLM agents, scoped by API key.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc from local assets (memory_api/ui/docs.py)
        redoc_url=None,
        # a generated client gets `query_cards`, not `query_cards_v1_cards_query_post`
        generate_unique_id_function=lambda route: route.name,
    )
    # deeper than any record may nest (limits.max_json_depth, at most 500) plus its envelope:
    # refused before the parser, whose recursion limit would give a nameless error
    app.add_middleware(BodyLimit, max_bytes=service.settings.serve.max_body_bytes, max_depth=512)
    install_error_handlers(app)
    install_guards(app)  # NUL / surrogates in query strings; 422s that never echo the input
    install_metrics(app, service)  # GET /metrics; requests timed by a plain ASGI wrapper
    mount_console(app, service)  # the web console under /ui, offline /docs and /redoc

    async def caller(
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        return service.authenticate(creds.credentials if creds else None)

    Caller = Annotated[Principal, Depends(caller)]
    CardId = Annotated[uuid.UUID, "card id"]

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], response_model=None)
    def readyz() -> dict[str, Any] | JSONResponse:
        """The database answers and uses are being written."""
        try:
            return service.ready()
        except SQLAlchemyError as exc:
            return JSONResponse({"database": str(exc).splitlines()[0]}, status_code=503)

    @app.post("/v1/cards/query", tags=["cards"], response_model=QueryResult)
    async def query_cards(body: QueryRequest, who: Caller) -> Response:
        """Cards whose preconditions hold on the task state, best first; with `explain`, each
        precondition's verdict and the score terms; with `prompt_tokens`, a prompt block."""
        # the hot route: the served rows' JSON joined once (no second validation
        # against the response model, which documents the same shape)
        if body.explain or not service.snapshots.ready(who.namespace):
            answer = await to_thread.run_sync(
                lambda: service.query_json(principal=who, request=body)
            )
        else:
            answer = service.query_json(principal=who, request=body)
        return Response(answer, media_type="application/json")

    @app.post("/v1/cards/check", tags=["cards"])
    async def check_action(body: CheckActionRequest, who: Caller) -> CheckActionResult:
        """Before a call: the cards keyed on this tool and arguments, and their failure modes."""
        if not service.snapshots.ready(who.namespace):
            await to_thread.run_sync(service.snapshots.get, who.namespace)
        return service.check_action(principal=who, request=body)

    @app.get("/v1/cards", tags=["cards"])
    def list_cards(
        who: Caller,
        status_: Annotated[list[str] | None, Query(alias="status")] = None,
        kind: Annotated[str | None, Query(pattern="^(experience|fact)$")] = None,
        q: Annotated[str | None, Query(max_length=200, description="scenario contains")] = None,
        min_confidence: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> list[CardPublic]:
        """Cards of the key's namespace, most recently updated first."""
        return service.list_cards(
            principal=who,
            statuses=status_,
            kind=kind,
            text=q,
            min_confidence=min_confidence,
            limit=limit,
            offset=offset,
        )

    @app.get("/v1/cards/recent", tags=["cards"])
    def recent_cards(
        who: Caller, limit: Annotated[int, Query(ge=1, le=200)] = 10
    ) -> list[CardPublic]:
        """The most recently changed active cards."""
        return service.recent(principal=who, limit=limit)

    @app.get("/v1/cards/{card_id}", tags=["cards"])
    def get_card(card_id: CardId, who: Caller) -> CardPublic:
        """One card with its evidence."""
        return service.get_card(principal=who, card_id=card_id)

    @app.get("/v1/cards/{card_id}/history", tags=["cards"])
    def card_history(card_id: CardId, who: Caller) -> list[HistoryEntry]:
        """Every version of a card: what changed, who changed it, why."""
        return service.history(principal=who, card_id=card_id)

    @app.post("/v1/cards/{card_id}/feedback", tags=["cards"])
    def feedback(card_id: CardId, body: FeedbackRequest, who: Caller) -> Feedback:
        """The outcome of a task that used the card (+0.05 success, -0.1 failure)."""
        return service.feedback(principal=who, card_id=card_id, request=body)

    @app.post("/v1/cards", tags=["cards"], status_code=status.HTTP_201_CREATED)
    def store_card(body: CardIn, who: Caller) -> CardPublic:
        """Store a card (write scope): validated like nightly drafts, marked operator-written."""
        return service.store_card(principal=who, card=body, via="api")

    @app.post("/v1/facts/search", tags=["facts"])
    def search_facts(body: FactSearchRequest, who: Caller) -> list[FactHit]:
        """Facts by keyword relevance (BM25) with decay-aware ranking."""
        return service.search_facts(
            principal=who,
            text=body.text,
            top_k=body.top_k,
            include_superseded=body.include_superseded,
        )

    @app.post("/v1/facts", tags=["facts"], status_code=status.HTTP_201_CREATED)
    def write_fact(body: FactIn, who: Caller) -> CardPublic:
        """Remember a fact (write scope); a newer value supersedes the older one. A non-admin
        key's fact waits in review (status "review") until an admin approves it."""
        return service.write_fact(principal=who, fact=body)

    @app.delete("/v1/facts/{fact_id}", tags=["facts"])
    def forget_fact(fact_id: uuid.UUID, who: Caller) -> CardPublic:
        """Forget a fact (write scope); it stays in history."""
        return service.forget_fact(principal=who, fact_id=fact_id)

    @app.get("/v1/review", tags=["review"])
    def review_queue(
        who: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 100
    ) -> list[CardPublic]:
        """Cards waiting for a person (admin scope)."""
        return service.review_queue(principal=who, limit=limit)

    @app.post("/v1/review/{card_id}/approve", tags=["review"])
    def approve(card_id: CardId, who: Caller) -> CardPublic:
        """Approve a card in review: it becomes active (admin scope)."""
        return service.decide(principal=who, card_id=card_id, approve=True, reason=None)

    @app.post("/v1/review/{card_id}/reject", tags=["review"])
    def reject(card_id: CardId, body: RejectRequest, who: Caller) -> CardPublic:
        """Reject a card in review, with the reason (admin scope)."""
        return service.decide(principal=who, card_id=card_id, approve=False, reason=body.reason)

    @app.post("/v1/trajectories", tags=["ingest"], status_code=status.HTTP_202_ACCEPTED)
    def ingest(
        who: Caller,
        body: Annotated[
            dict[str, Any] | list[dict[str, Any]],
            Body(description="one trajectory or a list (OpenAI chat messages or a step list)"),
        ],
    ) -> IngestResult:
        """Store trajectories for the nightly run (write scope); the same one twice is stored
        once. Accepted, not yet processed: retrospection runs later."""
        records = body if isinstance(body, list) else [body]
        report = service.ingest(principal=who, records=records)
        if report.refused and not report.stored and not report.duplicates:
            raise InvalidInput("; ".join(why for _, why in report.refused))
        return IngestResult(
            stored=report.stored,
            duplicates=report.duplicates,
            refused=[{"record": r, "error": e} for r, e in report.refused],
        )

    app.include_router(effects_router(service, Caller))
    document_answers(app)  # every error answer in the OpenAPI schema
    return app
