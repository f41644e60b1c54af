"""The caller's namespace (admin scope): what it holds, and deleting all of it."""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter

from memory_api.routes.deps import Caller, ServiceDep
from memory_core.namespaces.answers import DeletionOut, NamespaceOut
from memory_core.namespaces.counts import namespace_counts

router = APIRouter(tags=["namespace"])


@router.get("/v1/namespace")
def namespace_show(who: Caller, service: ServiceDep) -> NamespaceOut:
    """The counts of the key's namespace (admin scope)."""
    who.require("admin")
    found = namespace_counts(service.engine, who.namespace)
    if not found:
        return NamespaceOut(
            namespace=who.namespace, cards={}, facts={}, trajectories=0, dead_letters=0, keys=0
        )
    c = found[0]
    return NamespaceOut(
        namespace=c.namespace,
        cards=c.cards,
        facts=c.facts,
        trajectories=c.trajectories,
        dead_letters=c.dead_letters,
        keys=c.keys,
    )


@router.delete("/v1/namespace")
async def namespace_delete(who: Caller, service: ServiceDep) -> DeletionOut:
    """Delete the key's namespace and all it holds, the key included (admin scope)."""

    def run() -> DeletionOut:
        out = service.delete_namespace(principal=who)
        return DeletionOut(
            namespace=who.namespace, rows=out.rows, files=out.files, vectors=out.vectors
        )

    return await to_thread.run_sync(run)
