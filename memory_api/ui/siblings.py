"""Console actions on a card's siblings: merge one into the card, or reject it with a reason
(admin keys; the session's CSRF token; the key's namespace only)."""

from __future__ import annotations

import uuid

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from memory_api.ui.web import Console, ConsoleRoute
from memory_core.cards.siblings import merge_sibling, reject_sibling


def router(console: Console) -> APIRouter:
    """The sibling actions."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    @r.post("/cards/{card_id}/siblings/{sibling_id}/merge")
    async def merge(request: Request, card_id: uuid.UUID, sibling_id: uuid.UUID) -> Response:
        user = console.user(request)
        await console.form(request, user)
        p = user.principal
        p.require("admin")
        await to_thread.run_sync(  # database writes: off the event loop
            lambda: merge_sibling(
                engine=svc.engine,
                namespace=p.namespace,
                card_id=card_id,
                sibling_id=sibling_id,
                actor=p.actor,
            )
        )
        svc.snapshots.invalidate([p.namespace])
        return RedirectResponse(f"/ui/cards/{card_id}?done=merged#sib-h", status_code=303)

    @r.post("/cards/{card_id}/siblings/{sibling_id}/reject")
    async def reject(request: Request, card_id: uuid.UUID, sibling_id: uuid.UUID) -> Response:
        user = console.user(request)
        form = await console.form(request, user)
        p = user.principal
        p.require("admin")
        await to_thread.run_sync(
            lambda: reject_sibling(
                engine=svc.engine,
                namespace=p.namespace,
                card_id=card_id,
                sibling_id=sibling_id,
                actor=p.actor,
                reason=form.get("reason") or "",
            )
        )
        svc.snapshots.invalidate([p.namespace])
        return RedirectResponse(f"/ui/cards/{card_id}?done=sibling-rejected#sib-h", status_code=303)

    return r
