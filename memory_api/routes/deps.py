"""What every route depends on: the app's one MemoryService and the caller its key names."""

from __future__ import annotations

import uuid
from typing import Annotated

from anyio import to_thread
from fastapi import Depends, Request
from fastapi.openapi.models import HTTPBearer as HTTPBearerModel
from fastapi.security.base import SecurityBase
from fastapi.security.utils import get_authorization_scheme_param

from memory_core.serve.keys import Principal
from memory_core.serve.service import MemoryService


async def service_of(request: Request) -> MemoryService:
    """The service `create_app` was given (async: no thread hop on the hot route)."""
    service: MemoryService = request.app.state.service
    return service


ServiceDep = Annotated[MemoryService, Depends(service_of)]


class BearerKey(SecurityBase):
    """The caller's principal from `Authorization: Bearer <key>` (401 without a key, or with an
    unknown or revoked one). One dependency reading the request itself: FastAPI solves each
    dependency with a pass over the request's parameters, and three (the service, fastapi's
    HTTPBearer, the lookup) cost a tenth of the hot route's CPU. The OpenAPI document names the
    same scheme (HTTPBearer)."""

    def __init__(self) -> None:
        self.model = HTTPBearerModel(description="an API key from `hindsight keys create`")
        self.scheme_name = "HTTPBearer"

    async def __call__(self, request: Request) -> Principal:
        service: MemoryService = request.app.state.service
        scheme, secret = get_authorization_scheme_param(request.headers.get("authorization"))
        key = secret if secret and scheme.lower() == "bearer" else None
        if service.keys.cached(key):  # answered from memory: no thread hop
            return service.authenticate(key)
        # a key not seen lately is looked up in the database: off the event loop
        return await to_thread.run_sync(service.authenticate, key)


Caller = Annotated[Principal, Depends(BearerKey())]
CardId = Annotated[uuid.UUID, "card id"]
