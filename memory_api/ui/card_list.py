"""Console page: the card list (experience cards, active and in review by default; a total;
tool, support, effect and last-use columns, sorted on the server; keyset pages)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memory_api.ui.web import Console, ConsoleRoute
from memory_core.cards.filters import MAX_LIMIT, SORTS, CardFilter
from memory_core.effects.cards import effects_of
from memory_core.effects.estimate import LABELS, Verdict
from memory_core.errors import InvalidInput
from memory_core.models.card import CardStatus
from memory_core.screen.provenance import Origin
from memory_core.serve import browse
from memory_core.serve.list_columns import page_tools
from memory_core.settings import EffectRules

STATUSES = [s.value for s in CardStatus]
# what a curator works on: rejected, archived and superseded cards are a filter away
DEFAULT_STATUSES = ("active", "review")
VERDICTS = [(v.value, LABELS[v]) for v in Verdict]
# the list's sortable columns (header label, sort key); the first sort of a column is descending
COLUMNS = (
    ("Confidence", "confidence"),
    ("Tool", "tool"),
    ("Support", "support"),
    ("Uses", "uses"),
    ("Effect", "effect"),
    ("Last use", "last_used"),
    ("Updated", "updated"),
)


def _float(params: Any, name: str) -> float | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be a number within 0..1, not {raw!r}", field=name) from exc


def list_filters(params: Any, rules: EffectRules) -> CardFilter:
    """The list's filters from a query string: experience cards (facts have their own page),
    active and in review unless statuses are named."""
    return CardFilter(
        statuses=tuple(s for s in params.getlist("status") if s) or DEFAULT_STATUSES,
        kind="experience",
        text=(params.get("q") or "").strip() or None,
        min_confidence=_float(params, "min_confidence"),
        max_confidence=_float(params, "max_confidence"),
        tool=(params.get("tool") or "").strip() or None,
        origin=params.get("origin") or None,
        sort=params.get("sort") or "updated",
        descending=params.get("order", "desc") != "asc",
        effect=params.get("effect") or None,
        effect_rules=rules,
    )


def _sort_links(params: Any, f: CardFilter) -> dict[str, tuple[str, str | None]]:
    """Each column's link (a query string) and its current order (None: not sorted by it)."""
    keep = [(k, v) for k, v in params.multi_items() if k not in ("after", "sort", "order") and v]
    links = {}
    for _, key in COLUMNS:
        current = ("descending" if f.descending else "ascending") if f.sort == key else None
        order = "asc" if current == "descending" else "desc"
        links[key] = (urlencode([*keep, ("sort", key), ("order", order)]), current)
    return links


def router(console: Console) -> APIRouter:
    """The card list page."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    @r.get("/cards", response_class=HTMLResponse)
    def cards(request: Request, after: str | None = None, limit: int = 50) -> Response:
        user = console.user(request)
        user.principal.require("read")
        params = request.query_params
        rules = svc.settings.decay.effects
        f = list_filters(params, rules)
        ns, e = user.principal.namespace, svc.engine
        page, total = console.gather(
            lambda: browse.list_page(
                engine=e, namespace=ns, filters=f, after=after, limit=min(max(limit, 1), MAX_LIMIT)
            ),
            lambda: browse.count_cards(engine=e, namespace=ns, filters=f),
        )
        ids = [c.card_id for c in page.cards]
        effects, tools = console.gather(
            lambda: effects_of(engine=e, namespace=ns, card_ids=ids, rules=rules),
            lambda: page_tools(engine=e, namespace=ns, card_ids=ids),
        )
        keep = [(k, v) for k, v in params.multi_items() if k != "after" and v]
        nxt = urlencode([*keep, ("after", page.next_cursor)]) if page.next_cursor else None
        return console.render(
            request,
            "cards.html",
            user,
            page=page,
            total=total,
            f=f,
            statuses=STATUSES,
            origins=[o.value for o in Origin],
            sorts=list(SORTS),
            columns=COLUMNS,
            sort_links=_sort_links(params, f),
            verdicts=VERDICTS,
            effects=effects,
            tools=tools,
            next_qs=nxt,
            first_qs=urlencode(keep) if after else None,
        )

    return r
