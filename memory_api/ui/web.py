"""What every console page shares: templates, the signed-in user, CSRF checks, error pages."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from memory_api.errors import status_of
from memory_api.ui.session import COOKIE, ConsoleUser, Sessions
from memory_core.errors import HindsightError
from memory_core.redact import redact
from memory_core.serve.service import MemoryService

HERE = Path(__file__).parent
# pages run no script and load nothing from elsewhere; forms post only here
CSP = (
    "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'"
)
# an inline `x if c` needs its `else ''`: the Undefined it yields otherwise raises inside
# markupsafe's escape (269 of them made a third of a card page with its siblings)
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)
# text from stored rows (card lists, facts, charts) redacted as the service's answers are:
# a row written before redaction, or by another tool, shows no secret on a page
templates.env.filters["redacted"] = lambda v: redact(str(v)) if v else v
# JSON as text for a person: the page escapes it as HTML (tojson's \u003c escapes are for
# scripts, which these pages have none of)
templates.env.filters["json"] = lambda v: json.dumps(v, ensure_ascii=False, default=str)
templates.env.filters["short"] = lambda v: str(v)[:8]
templates.env.filters["when"] = lambda v: v.strftime("%Y-%m-%d %H:%M") if v else "never"


class SignInNeeded(Exception):
    """No valid session: the page redirects to the sign-in form."""


class CsrfRefused(Exception):
    """A form without this session's CSRF token."""


class Console:
    """The service, the session maker and helpers the page modules share."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service
        self.sessions = Sessions(service)
        # a page's independent reads at once on PostgreSQL: at 100k cards each is a scan of
        # its own, which server processes run side by side; on SQLite the readers share this
        # process and one file, where at once measured slower, so they stay in a row there
        self._reads = (
            None
            if service.engine.dialect.name == "sqlite"
            else ThreadPoolExecutor(max_workers=4, thread_name_prefix="console-read")
        )

    def gather(self, *reads: Callable[[], Any]) -> list[Any]:
        """The results of independent reads, in order (concurrently on PostgreSQL)."""
        if self._reads is None:
            return [r() for r in reads]
        futures = [self._reads.submit(r) for r in reads]
        return [f.result() for f in futures]

    def user(self, request: Request) -> ConsoleUser:
        """The signed-in user, or SignInNeeded."""
        user = self.sessions.user(request.cookies.get(COOKIE))
        if user is None:
            raise SignInNeeded
        request.state.console_user = user  # a refusal's page keeps the navigation
        return user

    async def form(self, request: Request, user: ConsoleUser) -> dict[str, str]:
        """The posted form, refused (403) unless it carries the session's CSRF token."""
        form = await request.form()
        data = {k: str(v) for k, v in form.items()}
        if not self.sessions.csrf_ok(user, data.get("csrf")):
            raise CsrfRefused
        return data

    def render(
        self, request: Request, name: str, user: ConsoleUser | None, status: int = 200, **ctx: Any
    ) -> HTMLResponse:
        """A page in the base layout."""
        page = templates.TemplateResponse(request, name, {"user": user, **ctx}, status_code=status)
        page.headers["Content-Security-Policy"] = CSP
        return page


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    """A plain error page (404 for another namespace's card, as for a missing one)."""
    page = templates.TemplateResponse(
        request,
        "error.html",
        {
            "user": getattr(request.state, "console_user", None),
            "status": status,
            "message": message,
        },
        status_code=status,
    )
    page.headers["Content-Security-Policy"] = CSP
    return page


class ConsoleRoute(APIRoute):
    """Routes whose refusals are pages: sign-in redirects, CSRF 403, Hindsight errors."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def run(request: Request) -> Response:
            t0 = time.perf_counter()
            resp = await _answer(request)
            # the page's own time, for bench/ui.py and the browser's network panel
            resp.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - t0) * 1000:.2f}"
            return resp

        async def _answer(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInNeeded:
                query = "?" + request.url.query if request.url.query else ""
                target = quote(request.url.path + query)
                return RedirectResponse(f"/ui/login?next={target}", status_code=303)
            except CsrfRefused:
                return error_page(
                    request, 403, "the form's CSRF token is missing or stale: reload the page"
                )
            except HindsightError as exc:
                return error_page(request, status_of(exc), str(exc))

        return run
