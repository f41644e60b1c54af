"""The surfaces bench/secret_leaks.py reads: what a read/write key, the logs and the LLM see.

`echo_model` is the scripted server's model that copies its prompt into its cards (so what
reaches a prompt reaches a card, and a rejected card); `read_surfaces` reads the API over
real HTTP, the MCP tools, and the console's pages, for one namespace, as one key.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from typing import Any

from memory_core.consolidate.stage import consolidate
from memory_core.ingest.store import ingest
from memory_core.retrospect.claims import worker_id
from memory_core.retrospect.factory import build_extractor
from memory_core.retrospect.stage import retrospect_once
from memory_core.settings import Settings
from memory_core.validate.stage import validate_drafts
from tests.helpers import fake_model
from tests.helpers.scripted_llm import Reply

STATUSES = ("active", "review", "draft", "quarantined", "rejected", "superseded", "archived")


class LogCapture(logging.Handler):
    """Every log record's formatted text (message, arguments and traceback)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def echo_model(body: dict[str, Any], _n: int) -> Reply:
    """A model that repeats what it reads: a careful card per failed call, and one more card
    holding the prompt's run lines in its scenario, note and handling."""
    kind = fake_model.prompt_kind(body)
    user = body["messages"][1]["content"]
    if kind == "decision_points":
        return Reply(json.dumps(fake_model.obedient_points(body, at_first_call=True)))
    if kind != "cards":
        return Reply(json.dumps({"facts": []}))
    out = fake_model.cards(body)["cards"]
    run = user.split("\n\nDecision points:\n", 1)[0]
    lines = [ln for ln in run.splitlines() if ln.strip()]
    for i, chunk in enumerate(lines[j : j + 3] for j in range(0, min(len(lines), 24), 3)):
        text = " ".join(chunk)[:900]
        out.append(
            {
                "point": 0,
                "scenario": text,
                "preconditions": ['tool == "echo"'],
                "action_sequence": [{"tool": "echo", "params_template": {}, "note": text}],
                "expected_outcome": "the run goes on",
                "actual_outcome": text,
                "failure_modes": [{"mode": f"copied {i}", "handling": text}],
                "confidence": 0.9,
            }
        )
    return Reply(json.dumps({"cards": out[:12]}))


def learn_with_llm(
    *, engine: Any, url: str, namespace: str, records: list[tuple[str, Any]]
) -> dict[str, Any]:
    """Ingest, then the LLM extractor (against the scripted server), validate, consolidate."""
    settings = Settings(
        embedding={"provider": "none"},
        llm={"base_url": url, "model": "scripted-1", "retry_delays_s": [0.05]},
    )
    rep = ingest(engine=engine, records=records, namespace=namespace, task_type="default")
    extractor = build_extractor(settings, engine)
    created = 0
    while True:
        b = retrospect_once(
            engine=engine,
            extractor=extractor,
            worker=worker_id(),
            batch_size=100,
            lease=timedelta(seconds=300),
        )
        if not b.claimed:
            break
        created += b.cards_created
    validate_drafts(engine=engine, reports_dir=None, namespace=namespace)
    consolidate(engine=engine, namespace=namespace, rules=settings.consolidate)
    return {"stored": rep.stored, "cards_created": created}


def _api(base: str, key: str, states: list[dict[str, Any]], queries: list[str]) -> tuple:
    import httpx

    api: list[str] = []
    rejected: list[str] = []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
        for status in STATUSES:
            offset = 0
            while True:
                r = c.get("/v1/cards", params={"status": status, "limit": 200, "offset": offset})
                page = r.json()
                sink = rejected if status == "rejected" else api
                sink.append(r.text)
                for card in page:
                    cid = card["card_id"]
                    sink.append(c.get(f"/v1/cards/{cid}").text)
                    sink.append(c.get(f"/v1/cards/{cid}/history").text)
                if len(page) < 200:
                    break
                offset += 200
        api.append(c.get("/v1/cards/recent", params={"limit": 200}).text)
        for state in states:
            body = {"task_state": state, "top_k": 10, "prompt_tokens": 800}
            api.append(c.post("/v1/cards/query", json=body).text)
        for q in queries:
            body = {"text": q, "top_k": 10, "include_superseded": True}
            api.append(c.post("/v1/facts/search", json=body).text)
    return api + rejected, rejected


def _console(base: str, key: str, trajectories: list[tuple[Any, int]]) -> list[str]:
    import re

    from tests.helpers.ui import signed_in

    out: list[str] = []
    with signed_in(base, key) as c:
        card_ids: set[str] = set()
        for status in STATUSES:
            page = c.get("/ui/cards", params={"status": status, "limit": 200}).text
            out.append(page)
            card_ids |= set(re.findall(r"/ui/cards/([0-9a-f-]{36})", page))
        for cid in sorted(card_ids):
            out.append(c.get(f"/ui/cards/{cid}").text)
        for tid, steps in trajectories:
            for step in range(3, steps + 7, 7):  # each page shows 7 steps around one
                out.append(c.get(f"/ui/trajectories/{tid}", params={"step": step}).text)
        for path in ("/ui/facts", "/ui/overview", "/ui/dead-letters"):
            out.append(c.get(path).text)
    return out


def _mcp(svc: Any, principal: Any, states: list[dict[str, Any]], queries: list[str]) -> list[str]:
    from mcp import Client

    from memory_api.mcp_server import create_mcp

    out: list[str] = []

    async def run() -> None:
        async with Client(create_mcp(svc, principal=principal)) as client:
            for state in states:
                r = await client.call_tool(
                    "query_memory_cards", {"task_state": state, "prompt_tokens": 800}
                )
                out.append(str(r.structured_content or r.content))
            for q in queries:
                r = await client.call_tool("memory_search", {"text": q})
                out.append(str(r.structured_content or r.content))
            r = await client.call_tool("list_recent_cards", {"limit": 200})
            out.append(str(r.structured_content or r.content))

    asyncio.run(run())
    return out


def read_surfaces(
    *,
    svc: Any,
    key: str,
    states: list[dict[str, Any]],
    queries: list[str],
    trajectories: list[tuple[Any, int]],
) -> dict[str, list[str]]:
    """Every text the key is served on each surface (a live server for the API and console)."""
    from memory_api.app import create_app
    from tests.helpers.serve import LiveServer

    with LiveServer(create_app(svc)) as server:
        api, rejected = _api(server.url, key, states, queries)
        console = _console(server.url, key, trajectories)
    mcp = _mcp(svc, svc.authenticate(key), states[:40], queries)
    return {"api": api, "rejected_cards": rejected, "mcp": mcp, "console": console}
