"""Console page: the query log (what each agent was served or withheld, and did it help)."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memory_api.ui.web import Console, ConsoleRoute
from memory_core.errors import InvalidInput
from memory_core.serve import browse
from memory_core.serve.query_log import (
    PAGE,
    QueryFilter,
    namespace_keys,
    parse_time,
    query_page,
)


def router(console: Console) -> APIRouter:
    """The query log page (read scope; the key's namespace only)."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    @r.get("/queries", response_class=HTMLResponse)
    def queries(request: Request, after: str | None = None) -> Response:
        user = console.user(request)
        user.principal.require("read")
        ns, e = user.principal.namespace, svc.engine
        params = request.query_params
        card_text = (params.get("card") or "").strip()
        key_text = (params.get("key") or "").strip()
        try:
            key_id = uuid.UUID(key_text) if key_text else None
        except ValueError as exc:
            raise InvalidInput(f"key must be a key id, not {key_text!r}", field="key") from exc
        card_id = (
            browse.card_by_prefix(engine=e, namespace=ns, value=card_text) if card_text else None
        )
        f = QueryFilter(
            card_id=card_id,
            key_id=key_id,
            since=parse_time(params.get("since"), "since"),
            until=parse_time(params.get("until"), "until"),
        )
        page, keys = console.gather(
            lambda: query_page(engine=e, namespace=ns, filters=f, after=after, limit=PAGE),
            lambda: namespace_keys(engine=e, namespace=ns),
        )
        keep = [(k, v) for k, v in params.multi_items() if k != "after" and v]
        nxt = urlencode([*keep, ("after", page.next_cursor)]) if page.next_cursor else None
        return console.render(
            request,
            "queries.html",
            user,
            page=page,
            f=f,
            card_text=card_text,
            since=params.get("since") or "",
            until=params.get("until") or "",
            keys=keys,
            next_qs=nxt,
            first_qs=urlencode(keep) if after else None,
        )

    return r
