"""Console actions a curator takes without the CLI: pin, unpin, restore a card; manage keys.

Each calls the memory_core function the CLI calls (set_pinned, restore, create_key,
list_keys, revoke_key); the pages only translate forms and refusals.
"""

from __future__ import annotations

import uuid

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memory_api.ui.web import Console, ConsoleRoute
from memory_core.decay import restore
from memory_core.effects.pins import set_pinned
from memory_core.errors import Forbidden, InvalidInput
from memory_core.serve.keys import SCOPES, create_key, list_keys, revoke_key


def router(console: Console) -> APIRouter:
    """The card actions and the keys page (admin keys, their own namespace only)."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    @r.post("/cards/{card_id}/pin")
    async def pin(request: Request, card_id: uuid.UUID) -> Response:
        user = console.user(request)
        form = await console.form(request, user)
        user.principal.require("admin")
        on = form.get("pinned")
        if on not in ("on", "off"):
            raise InvalidInput("pinned must be on or off", field="pinned")
        p = user.principal
        await to_thread.run_sync(  # a database write: off the event loop
            lambda: set_pinned(
                engine=svc.engine,
                namespace=p.namespace,
                card_id=card_id,
                pinned=on == "on",
                actor=p.actor,
            )
        )
        svc.snapshots.invalidate([p.namespace])  # served as pinned from the next query
        done = "pinned" if on == "on" else "unpinned"
        return RedirectResponse(f"/ui/cards/{card_id}?done={done}", status_code=303)

    @r.post("/cards/{card_id}/restore")
    async def restore_card(request: Request, card_id: uuid.UUID) -> Response:
        user = console.user(request)
        await console.form(request, user)
        user.principal.require("admin")
        p = user.principal
        await to_thread.run_sync(
            lambda: restore(
                engine=svc.engine, namespace=p.namespace, card_id=card_id, actor=p.actor
            )
        )
        svc.snapshots.invalidate([p.namespace])
        return RedirectResponse(f"/ui/cards/{card_id}?done=restored", status_code=303)

    def keys_page(request: Request, status: int = 200, **extra: object) -> Response:
        user = console.user(request)
        user.principal.require("admin")
        keys = list_keys(engine=svc.engine, namespace=user.principal.namespace)
        page = console.render(request, "keys.html", user, status, keys=keys, scopes=SCOPES, **extra)
        page.headers["Cache-Control"] = "no-store"  # a new key's secret is on this page once
        return page

    @r.get("/keys", response_class=HTMLResponse)
    def keys(request: Request, done: str | None = None) -> Response:
        return keys_page(request, notice=done)

    @r.post("/keys", response_class=HTMLResponse)
    async def create(request: Request) -> Response:
        user = console.user(request)
        form = await console.form(request, user)
        p = user.principal
        p.require("admin")
        namespace = (form.get("namespace") or p.namespace).strip()
        if namespace != p.namespace:
            # a key is one namespace's: its admin must not mint keys into another
            raise Forbidden(
                f"this key administers namespace {p.namespace!r}, not {namespace!r}: "
                "create keys of other namespaces with `hindsight keys create`"
            )
        scopes = [s for s in SCOPES if form.get(f"scope_{s}") == "on"]
        name = (form.get("name") or "").strip()
        try:
            if not name:
                raise InvalidInput("a key needs a name to tell it apart in lists", field="name")
            key, secret = await to_thread.run_sync(
                lambda: create_key(
                    engine=svc.engine, namespace=p.namespace, scopes=scopes, name=name
                )
            )
        except InvalidInput as exc:
            return keys_page(request, 400, error=str(exc), key_name=name)
        return keys_page(request, 200, created=key, secret=secret)

    @r.post("/keys/{key_id}/revoke")
    async def revoke(request: Request, key_id: uuid.UUID) -> Response:
        user = console.user(request)
        await console.form(request, user)
        p = user.principal
        p.require("admin")
        if key_id == p.key_id:
            return keys_page(
                request,
                400,
                error="this is the key you are signed in with: revoke it from another admin key",
            )
        key = await to_thread.run_sync(
            lambda: revoke_key(engine=svc.engine, key_id=key_id, namespace=p.namespace)
        )
        svc.keys.forget()  # this process refuses it at once (others within their cache time)
        console.sessions.forget()
        return RedirectResponse(f"/ui/keys?done=revoked+{key.prefix}", status_code=303)

    return r
