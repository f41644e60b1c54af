"""Liveness and readiness: no key needed."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from memory_api.errors import DATABASE_DOWN
from memory_api.routes.deps import ServiceDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(service: ServiceDep) -> dict[str, Any] | JSONResponse:
    """The database answers and uses are being written."""
    try:
        return service.ready()
    except SQLAlchemyError as exc:
        first = str(exc).splitlines()[0]
        body = {"database": first, "detail": f"the database does not answer: {first}"}
        return JSONResponse({**body, "code": DATABASE_DOWN}, status_code=503)
