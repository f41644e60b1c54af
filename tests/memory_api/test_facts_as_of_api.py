"""`as_of` on POST /v1/facts/search, MCP memory_search and `hindsight facts search --as-of`."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest
from mcp import Client

from memory_api.app import create_app
from memory_api.mcp_server import create_mcp
from memory_core.facts.store import FactIn, write_fact
from memory_core.serve.service import MemoryService
from tests.helpers.cli import hindsight
from tests.helpers.serve import LiveServer, keys_for


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _history(engine) -> None:
    for value, month in (("Paris datacenter", 1), ("Berlin datacenter", 6)):
        write_fact(
            engine=engine,
            namespace="team-a",
            fact=FactIn(key="deploy region", value=value),
            actor="t",
            now=datetime(2026, month, 1, tzinfo=UTC),
        )


@pytest.mark.anyio
async def test_as_of_through_the_api_mcp_and_cli(settings, engine, env_for) -> None:
    _history(engine)
    svc = MemoryService(engine=engine, settings=settings)
    keys = keys_for(engine)
    body = {"text": "deploy region", "as_of": "2026-03-01T00:00:00Z"}
    with LiveServer(create_app(svc)) as server:
        c = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {keys['read']}"}, timeout=30
        )
        then = c.post("/v1/facts/search", json=body).json()
        now = c.post("/v1/facts/search", json={"text": "deploy region"}).json()
        naive = c.post("/v1/facts/search", json={**body, "as_of": "2026-03-01T00:00:00"})
    assert [h["fact"]["value"] for h in then] == ["Paris datacenter"]
    assert [h["fact"]["value"] for h in now] == ["Berlin datacenter"]
    assert naive.status_code == 422 and "as_of" in naive.text
    async with Client(create_mcp(svc, principal=svc.authenticate(keys["read"]))) as client:
        res = await client.call_tool(
            "memory_search", {"text": "deploy region", "as_of": "2026-03-01"}
        )
        assert [h["fact"]["value"] for h in res.structured_content["result"]] == [
            "Paris datacenter"
        ]
        bad = await client.call_tool("memory_search", {"text": "deploy", "as_of": "soon"})
        assert bad.is_error and "not an ISO date" in bad.content[0].text
    svc.close()
    env = {**env_for, "HINDSIGHT_NAMESPACE": "team-a"}
    out = hindsight(env, "facts", "search", "deploy region", "--as-of", "2026-03-01", "-f", "json")
    assert [h["fact"]["value"] for h in json.loads(out.stdout)] == ["Paris datacenter"]
    refused = hindsight(env, "facts", "search", "deploy", "--as-of", "soon", check=False)
    assert refused.returncode != 0 and "not an ISO date" in refused.stderr
