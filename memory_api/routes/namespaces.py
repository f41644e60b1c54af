"""The caller's namespace (admin scope): what it holds, its export and import, its retention
policy, and deleting all of it."""

from __future__ import annotations

import tempfile

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from memory_api.routes.deps import Caller, ServiceDep
from memory_core.namespaces.answers import (
    DeletionOut,
    ImportOut,
    NamespaceOut,
    RetentionIn,
    RetentionOut,
)
from memory_core.namespaces.counts import namespace_counts
from memory_core.namespaces.export import export_lines
from memory_core.namespaces.importer import import_namespace
from memory_core.retention.policy import policy_of, set_policy

router = APIRouter(tags=["namespace"])
_SPOOL = 8 << 20  # an uploaded export bigger than this waits on disk, not in memory


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


@router.get("/v1/namespace/export")
def namespace_export(
    who: Caller, service: ServiceDep, with_trajectories: bool = False
) -> StreamingResponse:
    """The key's namespace as JSON Lines, streamed (admin scope); as `hindsight namespace
    export`."""
    who.require("admin")
    lines = export_lines(
        engine=service.engine, namespace=who.namespace, with_trajectories=with_trajectories
    )
    return StreamingResponse(lines, media_type="application/x-ndjson")


@router.post("/v1/namespace/import")
async def namespace_import(request: Request, who: Caller, service: ServiceDep) -> ImportOut:
    """Store a namespace export in the key's namespace, all of it or nothing; importing it
    again changes nothing (admin scope). The body is the file, as `hindsight namespace export`
    writes it."""
    who.require("admin")
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as body:
        async for chunk in request.stream():
            body.write(chunk)
        body.seek(0)

        def run() -> ImportOut:
            out = import_namespace(engine=service.engine, lines=body, namespace=who.namespace)
            return ImportOut(
                namespace=out.namespace,
                read=dict(out.read),
                added=out.added,
                same_signature=[str(c) for c in out.same_signature],
            )

        return await to_thread.run_sync(run)


@router.get("/v1/namespace/retention")
def namespace_retention(who: Caller, service: ServiceDep) -> RetentionOut:
    """The key's namespace's retention policy and the nightly's last removal (admin scope)."""
    who.require("admin")
    return policy_of(service.engine, service.settings.decay, who.namespace)


@router.put("/v1/namespace/retention")
def namespace_retention_set(body: RetentionIn, who: Caller, service: ServiceDep) -> RetentionOut:
    """Set the key's namespace's own retention days, applied by the next nightly (admin
    scope); as `hindsight namespace retention`."""
    who.require("admin")
    set_policy(
        engine=service.engine,
        namespace=who.namespace,
        actor=who.actor,
        trajectories_days=body.trajectories_days,
        uses_days=body.uses_days,
        clear=body.clear,
    )
    return policy_of(service.engine, service.settings.decay, who.namespace)
