"""Console page of the signed-in key's namespace (admin keys): what it holds, its retention
policy and last night's removal, and deleting all of it after its name is typed, through
MemoryService.delete_namespace as the API does."""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memory_api.ui.web import Console, ConsoleRoute
from memory_core.namespaces.counts import NamespaceCounts, namespace_counts
from memory_core.retention.policy import policy_of


def router(console: Console) -> APIRouter:
    """The namespace page and its delete action (admin keys, their own namespace only)."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    def page(request: Request, status: int = 200, **extra: object) -> Response:
        user = console.user(request)
        user.principal.require("admin")
        ns = user.principal.namespace
        found = namespace_counts(svc.engine, ns)
        counts = found[0] if found else NamespaceCounts(ns)
        retention = policy_of(svc.engine, svc.settings.decay, ns)
        return console.render(
            request, "namespace.html", user, status, counts=counts, retention=retention, **extra
        )

    @r.get("/namespace", response_class=HTMLResponse)
    def show(request: Request) -> Response:
        return page(request)

    @r.post("/namespace/delete", response_class=HTMLResponse)
    async def delete(request: Request) -> Response:
        user = console.user(request)
        form = await console.form(request, user)
        p = user.principal
        p.require("admin")
        if (form.get("confirm") or "").strip() != p.namespace:
            # the typed name is the confirmation: a slip of the mouse deletes nothing
            return page(
                request, 400, error=f"type the namespace's name, {p.namespace}, to delete it"
            )
        await to_thread.run_sync(lambda: svc.delete_namespace(principal=p))
        svc.keys.forget()  # the keys went with the namespace: this session's too
        console.sessions.forget()
        return RedirectResponse("/ui/login", status_code=303)

    return r
