"""Facts: keyword search, remember (superseding an older value), forget."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from memory_api.routes.deps import Caller, ServiceDep
from memory_core.facts.search import FactHit
from memory_core.facts.store import FactIn
from memory_core.models.card import CardPublic
from memory_core.serve.schemas import FactSearchRequest

router = APIRouter(tags=["facts"])


@router.post("/v1/facts/search")
def search_facts(body: FactSearchRequest, who: Caller, service: ServiceDep) -> list[FactHit]:
    """Facts by keyword relevance (BM25) with decay-aware ranking. Each fact's `standing` says
    what stands behind it; claims (only a speaker's word) come with include_claims."""
    return service.search_facts(
        principal=who,
        text=body.text,
        top_k=body.top_k,
        include_superseded=body.include_superseded,
        include_claims=body.include_claims,
        as_of=body.as_of,
    )


@router.post("/v1/facts", status_code=status.HTTP_201_CREATED)
def write_fact(body: FactIn, who: Caller, service: ServiceDep) -> CardPublic:
    """Remember a fact (write scope); a newer value supersedes the older one. A non-admin
    key's fact waits in review (status "review") until an admin approves it."""
    return service.write_fact(principal=who, fact=body)


@router.delete("/v1/facts/{fact_id}")
def forget_fact(fact_id: uuid.UUID, who: Caller, service: ServiceDep) -> CardPublic:
    """Forget a fact (write scope); it stays in history."""
    return service.forget_fact(principal=who, fact_id=fact_id)
