"""What an agent has, over HTTP, MCP and the CLI: a raw error text finds the card its
normalised form finds, and explain names the variables no card reads."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp import Client

from memory_api.app import create_app
from memory_api.mcp_server import create_mcp
from memory_core.serve.service import MemoryService
from tests.helpers.cli import hindsight
from tests.helpers.serve import LiveServer, add_card, keys_for

RAW = "Error: payment amount does not add up, total price is 305, but paid 255"
SIGNED = "payment amount does not add up, total price is <n>, but paid <n>"
TYPO = "tol: no card reads this; did you mean tool?"


def _cards(engine, namespace: str = "team-a") -> None:
    add_card(
        engine,
        namespace=namespace,
        scenario="after a payment that does not add up",
        preconditions=['last_tool == "book_reservation"', f'last_error == "{SIGNED}"'],
        tool="book_reservation",
        modes=[{"mode": SIGNED, "handling": "sum the payments to the total"}],
    )


def test_raw_error_over_http_query_and_check(settings, engine) -> None:
    _cards(engine)
    add_card(
        engine,
        scenario="seats gone",
        preconditions=['tool == "book_reservation"', 'error == "not enough seats on flight <id>"'],
        tool="book_reservation",
        modes=[{"mode": "not enough seats", "handling": "offer another flight"}],
    )
    keys = keys_for(engine)
    svc = MemoryService(engine=engine, settings=settings)
    with (
        LiveServer(create_app(svc)) as server,
        httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {keys['read']}"}, timeout=30
        ) as c,
    ):
        for state in (
            {"last_tool": "book_reservation", "last_error": RAW},
            {"last_tool": "book_reservation", "last_error": SIGNED},
        ):
            r = c.post("/v1/cards/query", json={"task_state": state, "record_use": False})
            assert r.status_code == 200, r.text
            cards = [h["card"]["scenario"] for h in r.json()["cards"]]
            assert cards == ["after a payment that does not add up"], state
        r = c.post(
            "/v1/cards/check",
            json={
                "tool": "book_reservation",
                "task_state": {"error": "Error: not enough seats on flight HAT229"},
            },
        )
        assert [w["handling"] for w in r.json()["warnings"]] == ["offer another flight"]
        r = c.post(
            "/v1/cards/query",
            json={"task_state": {"tol": "book_reservation"}, "explain": True},
        )
        explain = r.json()["explain"]
        assert explain["unread_variables"] == [
            {"name": "tol", "did_you_mean": "tool", "message": TYPO}
        ]
        # a plain query goes the fast way (no models): the same answer for the raw text
        r = c.post(
            "/v1/cards/query",
            json={"task_state": {"last_tool": "book_reservation", "last_error": RAW}},
        )
        assert len(r.json()["cards"]) == 1


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_raw_error_and_typo_over_mcp(settings, engine) -> None:
    _cards(engine)
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(keys_for(engine)["read"])
    async with Client(create_mcp(svc, principal=who)) as client:
        res = await client.call_tool(
            "query_memory_cards",
            {"task_state": {"last_tool": "book_reservation", "last_error": RAW}},
        )
        assert not res.is_error and len(res.structured_content["cards"]) == 1
        res = await client.call_tool(
            "query_memory_cards", {"task_state": {"tol": "x"}, "explain": True}
        )
        unread = res.structured_content["explain"]["unread_variables"]
        assert [u["message"] for u in unread] == [TYPO]


def test_raw_error_and_typo_on_the_cli(engine, env_for) -> None:
    _cards(engine, namespace="default")
    state = json.dumps({"last_tool": "book_reservation", "last_error": RAW})
    out = hindsight(env_for, "cards", "query", "--state", state, "--format", "json").stdout
    assert len(json.loads(out)) == 1
    typo = json.dumps({"tol": "book_reservation"})
    proc = hindsight(env_for, "cards", "query", "--state", typo, "--explain")
    assert TYPO in proc.stdout and "0 matching card(s) of 1 active" in proc.stdout
    proc = hindsight(env_for, "cards", "query", "--state", typo, "--explain", "--format", "json")
    assert json.loads(proc.stdout) == [] and TYPO in proc.stderr
