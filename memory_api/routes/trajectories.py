"""Trajectories: stored for the nightly run (accepted now, retrospected later)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, status

from memory_api.routes.deps import Caller, ServiceDep
from memory_core.errors import InvalidInput
from memory_core.serve.schemas import IngestResult

router = APIRouter(tags=["ingest"])


@router.post("/v1/trajectories", status_code=status.HTTP_202_ACCEPTED)
def ingest(
    who: Caller,
    service: ServiceDep,
    body: Annotated[
        dict[str, Any] | list[dict[str, Any]],
        Body(description="one trajectory or a list (OpenAI chat messages or a step list)"),
    ],
) -> IngestResult:
    """Store trajectories for the nightly run (write scope); the same one twice is stored
    once. Accepted, not yet processed: retrospection runs later."""
    records = body if isinstance(body, list) else [body]
    if not records:
        raise InvalidInput("no records: the body is an empty list", field="body")
    report = service.ingest(principal=who, records=records)
    if report.refused and not report.stored and not report.duplicates:
        raise InvalidInput("; ".join(r.error for r in report.refused))
    return IngestResult(stored=report.stored, duplicates=report.duplicates, refused=report.refused)
