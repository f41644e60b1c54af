"""Console pages: try a state, the changes, facts, and the overview pictures."""

from __future__ import annotations

import json
import textwrap
import uuid
from typing import Any
from urllib.parse import urlencode

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from memory_api.ui.datadocs import docs_root
from memory_api.ui.web import Console, ConsoleRoute
from memory_core.cards.filters import CardFilter
from memory_core.cards.query import example_state
from memory_core.db import read_session
from memory_core.effects.cards import verdict_counts
from memory_core.effects.estimate import LABELS, Verdict
from memory_core.errors import InvalidInput
from memory_core.models.columns import utcnow
from memory_core.redact import redact
from memory_core.serve import browse, pictures
from memory_core.serve.list_columns import page_facts
from memory_core.serve.schemas import QueryRequest

DEFAULT_BUDGET = 400
FACTS_PAGE = 50  # facts on one page of the list


LABEL_CHARS = 30  # a label's line in the chart's label column (12px text, 190px)


def bars(values: list[tuple[str, int]], *, width: int = 520, bar: int = 22) -> dict[str, Any]:
    """Geometry of a horizontal bar chart drawn as inline SVG by the template: a label too long
    for its column wraps onto more lines (never cut), and its row grows to hold them."""
    top = max((v for _, v in values), default=0) or 1
    rows, y = [], 0
    for label, v in values:
        lines = textwrap.wrap(label, LABEL_CHARS, break_long_words=True) or [""]
        height = max(bar, 15 * len(lines) + 4)
        rows.append(
            {
                "label": label,
                "lines": lines,
                "value": v,
                "y": y,
                "w": round((width - 240) * v / top),
            }
        )
        y += height + 6
    return {"rows": rows, "height": y + 4, "width": width, "bar": bar}


def router(console: Console) -> APIRouter:
    """The pages that try, list changes, search facts and draw."""
    r = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
    svc = console.service

    @r.get("/try", response_class=HTMLResponse)
    def try_form(request: Request) -> Response:
        user = console.user(request)
        user.principal.require("read")
        with read_session(svc.engine) as session:
            example = example_state(session=session, namespace=user.principal.namespace)
        state = json.dumps(example or {"task_type": "", "tool": ""}, indent=2)
        return console.render(
            request,
            "try.html",
            user,
            state=state,
            budget=DEFAULT_BUDGET,
            top_k=5,
            query="",
            result=None,
            error=None,
        )

    @r.post("/try", response_class=HTMLResponse)
    async def try_state(request: Request) -> Response:
        user = console.user(request)
        form = await console.form(request, user)
        user.principal.require("read")
        state_text = form.get("state") or "{}"
        page: dict[str, Any] = {
            "state": state_text,
            "budget": form.get("budget") or DEFAULT_BUDGET,
            "top_k": form.get("top_k") or 5,
            "query": form.get("query") or "",
        }
        try:
            state = json.loads(state_text)
            if not isinstance(state, dict):
                raise InvalidInput("the task state must be a JSON object", field="state")
            req = QueryRequest(
                task_state=state,
                top_k=int(page["top_k"]),
                query=page["query"] or None,
                explain=True,
                prompt_tokens=int(page["budget"]),
                record_use=False,  # trying a state is not an agent's use of the cards
            )
        except json.JSONDecodeError as exc:
            return console.render(
                request,
                "try.html",
                user,
                400,
                result=None,
                error=f"the task state is not JSON: {exc}",
                **page,
            )
        except (ValueError, ValidationError, InvalidInput) as exc:
            return console.render(
                request, "try.html", user, 400, result=None, error=str(exc), **page
            )
        # the API's query with explain and a prompt budget: the same retrieval and ranking
        # in a worker thread: explain at 100k cards must not hold the event loop
        result = await to_thread.run_sync(
            lambda: svc.query(principal=user.principal, request=req, via="console")
        )
        return console.render(request, "try.html", user, result=result, error=None, **page)

    @r.get("/changes", response_class=HTMLResponse)
    def changes(request: Request, since: str | None = None) -> Response:
        user = console.user(request)
        user.principal.require("read")
        from datetime import UTC, datetime, timedelta

        from memory_core.changes import changes_since

        if since:
            try:
                when = datetime.fromisoformat(since)
            except ValueError as exc:
                raise InvalidInput(f"{since!r} is not an ISO date or time", field="since") from exc
            when = when if when.tzinfo else when.replace(tzinfo=UTC)
        else:  # tonight: the last day
            when = utcnow() - timedelta(days=1)
        rows = changes_since(
            engine=svc.engine, since=when, namespace=user.principal.namespace, limit=2000
        )
        return console.render(request, "changes.html", user, rows=rows, since=when)

    @r.get("/facts", response_class=HTMLResponse)
    def facts(
        request: Request, q: str = "", fact: uuid.UUID | None = None, after: str | None = None
    ) -> Response:
        user = console.user(request)
        p = user.principal
        p.require("read")  # the search, the chain, conflicts and expiring facts are all reads
        ns, e = p.namespace, svc.engine
        # every active fact, fifty a page newest first (keyset), narrowed by the search's text
        listed = CardFilter(statuses=("active",), kind="fact", text=q.strip() or None)
        page, total, hits, chain, conflicts, expiring = console.gather(
            lambda: browse.list_page(
                engine=e, namespace=ns, filters=listed, after=after, limit=FACTS_PAGE
            ),
            lambda: browse.count_cards(engine=e, namespace=ns, filters=listed),
            lambda: (
                # an operator sees claims too, each marked with its speaker
                svc.search_facts(
                    principal=p, text=q, top_k=20, include_superseded=True, include_claims=True
                )
                if q.strip()
                else []
            ),
            lambda: browse.chain(engine=e, namespace=ns, card_id=fact) if fact else None,
            lambda: browse.fact_conflicts(engine=e, namespace=ns),
            lambda: browse.expiring_facts(engine=e, namespace=ns),
        )
        values = page_facts(engine=e, namespace=ns, card_ids=[c.card_id for c in page.cards])
        return console.render(
            request,
            "facts.html",
            user,
            page=page,
            values=values,
            total=total,
            next_qs=urlencode([("q", q), ("after", page.next_cursor)])
            if page.next_cursor
            else None,
            first_qs=urlencode([("q", q)]) if after else None,
            q=q,
            hits=hits,
            chain=chain,
            conflicts=conflicts,
            expiring=expiring,
        )

    @r.get("/overview", response_class=HTMLResponse)
    def overview(request: Request) -> Response:
        user = console.user(request)
        user.principal.require("read")
        ns, e = user.principal.namespace, svc.engine
        rules = svc.settings.decay.effects
        c, days, failures, effects = console.gather(
            lambda: pictures.counts(engine=e, namespace=ns),
            lambda: pictures.uses_per_day(engine=e, namespace=ns, now=utcnow()),
            lambda: pictures.top_failure_modes(engine=e, namespace=ns),
            lambda: verdict_counts(engine=e, namespace=ns, rules=rules),
        )
        conf = [(f"{i / 10:.1f}–{(i + 1) / 10:.1f}", n) for i, n in enumerate(c.confidence)]
        return console.render(
            request,
            "overview.html",
            user,
            total=sum(c.by_status.values()),
            by_status=bars(sorted(c.by_status.items(), key=lambda kv: -kv[1])),
            confidence=bars(conf),
            uses=bars([(d[5:], n) for d, n in days]),
            failures=bars([(redact(m), n) for m, n in failures]),
            effects=bars([(LABELS[Verdict(v)], n) for v, n in effects.items()]),
            # the validation runs' report (Great Expectations Data Docs), once one was written
            data_docs=user.principal.allows("admin")
            and (docs_root(console, ns) / "index.html").is_file(),
            sample=pictures.FAILURE_SAMPLE,
        )

    return r
