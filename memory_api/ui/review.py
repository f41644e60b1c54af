"""Console pages that decide: the review queue (approve, reject with a reason, edit)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from memory_api.ui.web import Console, ConsoleRoute
from memory_core.errors import InvalidInput
from memory_core.validate.review import EDITABLE, edit

REVIEW_PAGE = 25  # the riskiest origin first, then oldest; a decision brings the next one up


def editable(card: Any) -> str:
    """The editable fields of a card as the JSON an editor changes."""
    return json.dumps({k: getattr(card, k) for k in sorted(EDITABLE)}, indent=2, default=str)


def router(console: Console) -> APIRouter:
    """The review pages (admin scope to decide; the key's namespace only)."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    def queue(request: Request, status: int = 200, **extra: Any) -> Response:
        user = console.user(request)
        user.principal.require("admin")
        cards = svc.review_queue(principal=user.principal, limit=REVIEW_PAGE)
        return console.render(
            request, "review.html", user, status, cards=cards, editable=editable, **extra
        )

    @r.get("/review", response_class=HTMLResponse)
    def review(request: Request, done: str | None = None) -> Response:
        return queue(request, notice=done)

    @r.post("/review/{card_id}/decide")
    async def decide(request: Request, card_id: uuid.UUID) -> Response:
        user = console.user(request)
        form = await console.form(request, user)
        user.principal.require("admin")
        verdict = form.get("decision")
        if verdict not in ("approve", "reject"):
            raise InvalidInput("decision must be approve or reject", field="decision")
        try:
            reason = (form.get("reason") or "").strip() or None
            await to_thread.run_sync(  # database writes: off the event loop
                lambda: svc.decide(
                    principal=user.principal,
                    card_id=card_id,
                    approve=verdict == "approve",
                    reason=reason,
                )
            )
        except InvalidInput as exc:
            return queue(request, 400, error=f"{card_id}: {exc}")
        done = "approved" if verdict == "approve" else "rejected"
        return RedirectResponse(f"/ui/review?done={done}+{card_id}", status_code=303)

    def _edit(principal: Any, card_id: uuid.UUID, fields: dict[str, Any]) -> None:
        current = svc.get_card(principal=principal, card_id=card_id)
        changes = {k: v for k, v in fields.items() if getattr(current, k, None) != v}
        if not changes:
            raise InvalidInput("nothing changed", field="fields")
        # the same re-validated edit the CLI makes (the suite runs before it is saved)
        edit(
            engine=svc.engine,
            namespace=principal.namespace,
            card_id=card_id,
            changes=changes,
            actor=principal.actor,
            registry=svc.settings.review.registry,
        )

    @r.post("/review/{card_id}/edit")
    async def edit_card(request: Request, card_id: uuid.UUID) -> Response:
        user = console.user(request)
        form = await console.form(request, user)
        user.principal.require("admin")
        try:
            fields = json.loads(form.get("fields") or "")
            if not isinstance(fields, dict):
                raise InvalidInput("the edit must be a JSON object of fields", field="fields")
            await to_thread.run_sync(lambda: _edit(user.principal, card_id, fields))
        except json.JSONDecodeError as exc:
            return queue(request, 400, error=f"{card_id}: the edit is not JSON: {exc}")
        except InvalidInput as exc:
            return queue(request, 400, error=f"{card_id}: {exc}")
        except ValidationError as exc:  # edit() lets the model's own refusal through
            why = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            return queue(request, 400, error=f"{card_id}: the edited card fails validation: {why}")
        svc.snapshots.invalidate([user.principal.namespace])
        return RedirectResponse(f"/ui/review?done=edited+{card_id}", status_code=303)

    return r
