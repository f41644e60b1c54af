"""Console page of dead letters: paged, redrive a selection or all, discard with a reason.

Redrive and discard are the memory_core functions the CLI uses (redrive, discard); a parked
part links to the Prefect flow run that parked it when the Prefect UI's address is set.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memory_api.ui.web import Console, ConsoleRoute
from memory_core.errors import InvalidInput, NotFound
from memory_core.redact import redact
from memory_core.retrospect.dead_letters import (
    count_dead_letters,
    dead_parts,
    list_dead_letters,
    list_rejections,
    redrive,
)
from memory_core.retrospect.discard import discard, list_discarded

PAGE = 50  # dead letters on one page
SHOWN = 200  # rejected answers and discards listed under them


def run_link(base: str | None, run: str | None) -> str | None:
    """The Prefect UI's page of a flow run, when the UI's address is configured."""
    if not base or not run:
        return None
    return f"{base.rstrip('/')}/runs/flow-run/{run}"


def router(console: Console) -> APIRouter:
    """The dead-letter page and its actions (write to redrive, admin to discard)."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    @r.get("/dead-letters", response_class=HTMLResponse)
    def dead_letters(request: Request, page: int = 1, done: str | None = None) -> Response:
        user = console.user(request)
        user.principal.require("read")
        ns, e = user.principal.namespace, svc.engine
        total = count_dead_letters(engine=e, namespace=ns)
        last = max((total + PAGE - 1) // PAGE, 1)
        at = min(max(page, 1), last)
        rows = list_dead_letters(engine=e, namespace=ns, limit=PAGE, offset=(at - 1) * PAGE)
        ui = svc.settings.serve.prefect_ui_url
        # each parked part with its error (redacted: a model's answer quoted in an error is text
        # derived from the run) and the flow run that parked it
        parts = {
            t.id: [(p.part, redact(p.error), p.run, run_link(ui, p.run)) for p in dead_parts(t)]
            for t in rows
        }
        keys = {t.id: redact(t.key) for t in rows}
        # answers refused for their content: no dead letters (a retry gets the same answer);
        # their reason and raw answer are derived from the run too: redacted
        rejected = [
            replace(x, key=redact(x.key), reason=redact(x.reason), raw=redact(x.raw))
            for x in list_rejections(engine=e, namespace=ns, limit=SHOWN)
        ]
        discarded = [
            replace(
                d, key=redact(d.key), reason=redact(d.reason), errors=[redact(x) for x in d.errors]
            )
            for d in list_discarded(engine=e, namespace=ns, limit=SHOWN)
        ]
        return console.render(
            request,
            "dead_letters.html",
            user,
            rows=rows,
            parts=parts,
            keys=keys,
            total=total,
            page=at,
            pages=last,
            first_index=(at - 1) * PAGE,
            rejected=rejected,
            discarded=discarded,
            notice=done,
        )

    async def chosen(request: Request, scope: str) -> tuple[list[str] | None, dict[str, str]]:
        """The form's selected ids (None: "all" was asked for), after CSRF and the scope."""
        user = console.user(request)
        data = await console.form(request, user)
        user.principal.require(scope)
        if data.get("all") == "yes":
            return None, data
        ids = [str(v) for v in (await request.form()).getlist("id")]
        for i in ids:
            try:
                uuid.UUID(i)
            except ValueError as exc:
                raise InvalidInput(f"{i!r} is not a dead letter's id", field="id") from exc
        if not ids:
            raise InvalidInput("select at least one dead letter, or use Redrive all", field="id")
        return ids, data

    @r.post("/dead-letters/redrive")
    async def redrive_some(request: Request) -> Response:
        ids, _ = await chosen(request, "write")
        p = console.user(request).principal
        n = await to_thread.run_sync(
            lambda: redrive(engine=svc.engine, ids=ids, namespace=p.namespace)
        )
        return RedirectResponse(f"/ui/dead-letters?done=redriven+{n}", status_code=303)

    @r.post("/dead-letters/discard")
    async def discard_some(request: Request) -> Response:
        # giving up on a run loses its lesson: a curator's decision
        ids, data = await chosen(request, "admin")
        p = console.user(request).principal
        n = await to_thread.run_sync(
            lambda: discard(
                engine=svc.engine,
                ids=ids,
                namespace=p.namespace,
                reason=data.get("reason") or "",
                actor=p.actor,
            )
        )
        return RedirectResponse(f"/ui/dead-letters?done=discarded+{n}", status_code=303)

    @r.post("/dead-letters/{trajectory_id}/redrive")
    async def redrive_one(request: Request, trajectory_id: uuid.UUID) -> Response:
        user = console.user(request)
        await console.form(request, user)
        user.principal.require("write")
        n = redrive(engine=svc.engine, ids=[str(trajectory_id)], namespace=user.principal.namespace)
        if n == 0:
            raise NotFound(
                f"no dead letter {trajectory_id} in namespace {user.principal.namespace!r}"
            )
        return RedirectResponse(f"/ui/dead-letters?done=redriven+{trajectory_id}", status_code=303)

    return r
