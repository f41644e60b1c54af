"""Console pages: sign-in, a card, a trajectory around a step (the list: card_list.py)."""

from __future__ import annotations

import hmac
import logging
import secrets
import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memory_api.ui.history import timeline
from memory_api.ui.session import COOKIE, SESSION_S
from memory_api.ui.web import Console, ConsoleRoute
from memory_core.cards.profile import profile_words
from memory_core.cards.siblings import siblings_of
from memory_core.errors import InvalidPrecondition, Unauthorized
from memory_core.preconditions import compile_stored
from memory_core.serve import browse

# who saw a raw run, when, which: the operator's log keeps it (logger "hindsight.audit")
audit = logging.getLogger("hindsight.audit")
LOGIN_COOKIE = "hs_login"
HISTORY_PAGE = 50  # versions on one card page
USES_PAGE = 20  # uses on one card page


def _corroboration(provenance: dict[str, Any]) -> list[tuple[dict[str, Any], uuid.UUID | None]]:
    """A fact's corroborating tool results, each with the id of the run it was seen in."""
    out: list[tuple[dict[str, Any], uuid.UUID | None]] = []
    for seen in provenance.get("corroboration") or []:
        if not isinstance(seen, dict):
            continue
        try:
            rid = uuid.UUID(str(seen.get("trajectory_id")))
        except ValueError:  # written without its run (an older fact): no run to name
            rid = None
        out.append((seen, rid))
    return out


def _variables(expression: str) -> list[str]:
    try:
        return sorted(compile_stored(expression).variables)
    except InvalidPrecondition:
        return []


def router(console: Console) -> APIRouter:
    """The card pages."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    def login_page(request: Request, target: str, status: int, error: str | None) -> Response:
        # the sign-in form has no session yet: its CSRF token is a double-submit cookie
        # (SameSite=Strict, so a form posted from another site arrives without it)
        token = secrets.token_urlsafe(16)
        page = console.render(
            request, "login.html", None, status, next=target, error=error, login_csrf=token
        )
        page.set_cookie(
            LOGIN_COOKIE, token, max_age=3600, httponly=True, samesite="strict", path="/ui"
        )
        return page

    @r.get("/login", response_class=HTMLResponse)
    def login_form(request: Request, next: str = "/ui/cards") -> Response:
        return login_page(request, next, 200, None)

    @r.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        target = str(form.get("next") or "/ui/cards")
        if not target.startswith("/ui/") or target.startswith("//"):
            target = "/ui/cards"  # no open redirect
        expected = request.cookies.get(LOGIN_COOKIE) or ""
        sent = str(form.get("csrf") or "")
        if not expected or not hmac.compare_digest(expected, sent):
            return login_page(request, target, 403, "the sign-in form was stale: try again")
        try:
            cookie = console.sessions.sign_in(str(form.get("key") or ""))
        except Unauthorized as exc:
            return login_page(request, target, 401, str(exc))
        resp = RedirectResponse(target, status_code=303)
        resp.delete_cookie(LOGIN_COOKIE, path="/ui")
        resp.set_cookie(
            COOKIE,
            cookie,
            max_age=SESSION_S,
            httponly=True,
            samesite="strict",
            path="/ui",
            secure=request.url.scheme == "https",
        )
        return resp

    @r.post("/logout")
    async def logout(request: Request) -> Response:
        await console.form(request, console.user(request))
        resp = RedirectResponse("/ui/login", status_code=303)
        resp.delete_cookie(COOKIE, path="/ui")
        return resp

    @r.get("", response_class=HTMLResponse)
    @r.get("/", response_class=HTMLResponse)
    def home() -> Response:
        return RedirectResponse("/ui/cards", status_code=303)

    @r.get("/cards/{card_id}", response_class=HTMLResponse)
    def card(
        request: Request, card_id: str, versions: int = 0, uses: int = 0, done: str | None = None
    ) -> Response:
        user = console.user(request)
        user.principal.require("read")
        full = browse.card_by_prefix(
            engine=svc.engine, namespace=user.principal.namespace, value=card_id
        )
        if str(full) != card_id:  # a prefix, as the tables show ids: the card's own address
            return RedirectResponse(f"/ui/cards/{full}", status_code=303)
        c = svc.get_card(principal=user.principal, card_id=full)
        entries, folded = timeline(svc.history(principal=user.principal, card_id=full))
        skip = max(versions, 0)
        corroboration = _corroboration(c.provenance) if c.kind == "fact" else []
        runs = browse.runs_of(
            engine=svc.engine,
            namespace=user.principal.namespace,
            trajectory_ids=[e.trajectory_id for e in c.evidence]
            + [rid for _, rid in corroboration if rid is not None],
        )
        ns, at = user.principal.namespace, max(uses, 0)
        used = browse.recent_uses(
            engine=svc.engine, namespace=ns, card_id=full, limit=USES_PAGE, skip=at
        )
        uses_total = browse.use_total(engine=svc.engine, namespace=ns, card_id=full)
        return console.render(
            request,
            "card.html",
            user,
            card=c,
            # judged by the namespace's configured rules (as the decay stage does) in get_card
            effect=c.effect,
            uses=used,
            uses_total=uses_total,
            uses_skip=at,
            uses_next=at + USES_PAGE if at + USES_PAGE < uses_total else None,
            uses_prev=max(at - USES_PAGE, 0) if at else None,
            runs=runs,
            corroboration=corroboration,
            timeline=entries[skip : skip + HISTORY_PAGE],
            versions_total=len(entries),
            versions_skip=skip,
            versions_next=skip + HISTORY_PAGE if skip + HISTORY_PAGE < len(entries) else None,
            versions_prev=max(skip - HISTORY_PAGE, 0) if skip else None,
            outcomes_folded=folded,
            preconditions=[(p, _variables(p)) for p in c.preconditions],
            seen_with=profile_words(c.provenance),
            notice={
                "pinned": "pinned",
                "unpinned": "unpinned",
                "restored": "restored",
                "merged": "the sibling was merged into this card",
                "sibling-rejected": "the sibling was rejected",
            }.get(done or ""),
            siblings=siblings_of(engine=svc.engine, namespace=ns, card_id=full),
        )

    @r.get("/trajectories/{trajectory_id}", response_class=HTMLResponse)
    def trajectory(request: Request, trajectory_id: uuid.UUID, step: int = 0) -> Response:
        user = console.user(request)
        user.principal.require("read")
        w = browse.trajectory_window(
            engine=svc.engine,
            namespace=user.principal.namespace,
            trajectory_id=trajectory_id,
            step=max(step, 0),
        )
        return console.render(request, "trajectory.html", user, w=w)

    @r.post("/trajectories/{trajectory_id}/reveal", response_class=HTMLResponse)
    async def reveal(request: Request, trajectory_id: uuid.UUID) -> Response:
        # the run as submitted, secrets and all: an admin's explicit, logged act, never a link
        user = console.user(request)
        form = await console.form(request, user)
        user.principal.require("admin")
        step = max(int(form["step"]), 0) if form.get("step", "").isdigit() else 0
        w = browse.trajectory_window(
            engine=svc.engine,
            namespace=user.principal.namespace,
            trajectory_id=trajectory_id,
            step=step,
            raw=True,
        )
        audit.warning(
            "raw run revealed: trajectory %s (namespace %r, steps %d-%d) to key %s at %s",
            trajectory_id,
            user.principal.namespace,
            w.first,
            w.first + len(w.steps) - 1,
            user.principal.actor,
            datetime.now(UTC).isoformat(timespec="seconds"),
        )
        page = console.render(request, "trajectory.html", user, w=w)
        page.headers["Cache-Control"] = "no-store"
        return page

    return r
