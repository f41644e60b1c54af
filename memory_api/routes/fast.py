"""The hot query route without FastAPI's per-request dependency solving.

Profiled at 5k cards, solving the route's five dependencies (the body, the caller, its bearer
credentials, the service twice) cost about as much CPU as the query itself. A request with a
JSON body that validates and a key already in the cache is answered here directly; any other
(no key, an unknown key, a body that fails to parse or validate, a test overriding a
dependency) goes through the route as declared, so its errors and the OpenAPI document are
FastAPI's own.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from anyio import to_thread
from fastapi import Request, Response
from fastapi.routing import APIRoute
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import ValidationError

from memory_core.serve.schemas import QueryRequest
from memory_core.serve.service import MemoryService


class QueryRoute(APIRoute):
    """POST /v1/cards/query: the common request answered without the dependency solver."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The declared route's handler behind the direct path."""
        declared = super().get_route_handler()

        async def handler(request: Request) -> Response:
            answer = await _direct(request)
            return answer if answer is not None else await declared(request)

        return handler


async def _direct(request: Request) -> Response | None:
    """The answer, or None where the declared route must decide (it reads the cached body)."""
    if request.app.dependency_overrides:
        return None
    kind = request.headers.get("content-type", "")
    if kind.partition(";")[0].strip().lower() != "application/json":
        return None
    # as HTTPBearer reads it (memory_api/routes/deps.py)
    scheme, secret = get_authorization_scheme_param(request.headers.get("authorization"))
    service: MemoryService = request.app.state.service
    if scheme.lower() != "bearer" or not secret or not service.keys.cached(secret):
        return None  # an unknown key is looked up in the database by the declared route
    body = await request.body()
    try:
        # python-mode validation of the parsed JSON, as FastAPI validates a body; orjson
        # refuses what json.loads would accept (NaN, huge numbers): the declared route then
        query = QueryRequest.model_validate(orjson.loads(body))
    except (orjson.JSONDecodeError, ValidationError):
        return None
    who = service.authenticate(secret)
    answer = await to_thread.run_sync(lambda: service.query_json(principal=who, request=query))
    return Response(answer, media_type="application/json")
