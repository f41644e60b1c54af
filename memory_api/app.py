"""The read API: FastAPI routes that translate HTTP into MemoryService calls (docs at /docs);
the routes live in memory_api/routes/, one module per resource.

Every route needs `Authorization: Bearer <key>`; the key decides the namespace. Hot routes are
async: the service answers them from memory, so a thread hop would only add latency. What may
take long (loading a namespace's snapshot, `explain`, which checks every card) runs in a worker
thread, so the event loop never waits on it and a health check answers at once.
"""

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.types import ASGIApp

from memory_api.errors import BodyLimit, install_error_handlers
from memory_api.guards import install_guards
from memory_api.hot_query import PATH as HOT_PATH
from memory_api.hot_query import HotQuery
from memory_api.metrics import install_metrics
from memory_api.routes import ROUTERS
from memory_api.ui import CONSOLE_PATH, mount_console
from memory_core.serve.service import MemoryService


def freeze_long_lived() -> None:
    """Move what lives by now (modules, a loaded snapshot) out of the garbage collector's full
    passes: at 5,000 cards each pass scanned ~200k objects and stalled requests ~100 ms, and
    it grows with the cards. Young cycles are collected first; the snapshot has none."""
    gc.collect(1)
    gc.freeze()


def _route(path: str, method: str) -> Any:
    """The API's route object for a path and method (metrics label requests by it)."""
    return next(
        r
        for router in ROUTERS
        for r in router.routes
        if getattr(r, "path", None) == path and method in (getattr(r, "methods", None) or ())
    )


class _API(FastAPI):
    """FastAPI with the hot route in front of its whole middleware stack (hot_query.py)."""

    front: Any = None  # builds the layer in front: called with the stack Starlette built

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        return stack if self.front is None else self.front(stack)


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

    app = _API(
        title="Hindsight",
        summary="Experience cards and facts for LLM agents, scoped by API key.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc from local assets (memory_api/ui/docs.py)
        redoc_url=None,
        # a generated client gets `query_cards`, not `query_cards_v1_cards_query_post`
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.service = service  # what the routes' ServiceDep answers (memory_api/routes/deps.py)
    # the API's routes first: a request is matched against the routes in order, and the
    # console's forty-odd routes ahead of /v1/cards/query cost it more than its retrieval
    for router in ROUTERS:
        app.include_router(router)
    # deeper than any record may nest (limits.max_json_depth, at most 500) plus its envelope:
    # refused before the parser, whose recursion limit would give a nameless error
    app.add_middleware(BodyLimit, max_bytes=service.settings.serve.max_body_bytes, max_depth=512)
    install_error_handlers(app)
    install_guards(app)  # NUL / surrogates in query strings; 422s that never echo the input
    counters = install_metrics(app, service)  # GET /metrics; requests timed by an ASGI wrapper
    # outermost: warm plain queries answered before every other layer (memory_api/hot_query.py)
    route = _route(HOT_PATH, "POST")
    max_bytes = service.settings.serve.max_body_bytes

    def front(stack: ASGIApp) -> HotQuery:
        return HotQuery(stack, service=service, route=route, counters=counters, max_bytes=max_bytes)

    app.front = front
    mount_console(app, service)  # the web console under /ui, offline /docs and /redoc

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        """The address `serve` prints leads somewhere: the console (it asks for a key)."""
        return RedirectResponse(CONSOLE_PATH, status_code=307)

    return app
