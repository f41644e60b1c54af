"""What every route depends on: the app's one MemoryService and the caller its key names."""

from __future__ import annotations

import uuid
from typing import Annotated

from anyio import to_thread
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memory_core.serve.keys import Principal
from memory_core.serve.service import MemoryService

_bearer = HTTPBearer(auto_error=False, description="an API key from `hindsight keys create`")


async def service_of(request: Request) -> MemoryService:
    """The service `create_app` was given (async: no thread hop on the hot route)."""
    service: MemoryService = request.app.state.service
    return service


ServiceDep = Annotated[MemoryService, Depends(service_of)]


async def caller(
    service: ServiceDep,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The key's principal (401 without a key, or with an unknown or revoked one)."""
    secret = creds.credentials if creds else None
    if service.keys.cached(secret):  # answered from memory: no thread hop
        return service.authenticate(secret)
    # a key not seen lately is looked up in the database: off the event loop
    return await to_thread.run_sync(service.authenticate, secret)


Caller = Annotated[Principal, Depends(caller)]
CardId = Annotated[uuid.UUID, "card id"]
