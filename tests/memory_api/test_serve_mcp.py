"""The MCP tools through the SDK client: in-process, over real stdio, over streamable HTTP."""

from __future__ import annotations

import json
import os
import sys
import uuid

import httpx
import httpx2
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from memory_api.mcp_http import mcp_http_app
from memory_api.mcp_server import create_mcp
from memory_core.namespaces.counts import namespace_counts
from memory_core.serve.keys import create_key
from memory_core.serve.schemas import QueryRequest
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card, keys_for

WRITE_TOOLS = {"store_memory_card", "memory_write", "memory_forget", "namespace_delete"}
ALL_TOOLS = WRITE_TOOLS | {
    "query_memory_cards",
    "check_action",
    "list_recent_cards",
    "memory_search",
    "update_card_confidence",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _data(result):
    assert not result.is_error, result.content
    return result.structured_content


@pytest.mark.anyio
async def test_tools_in_process(settings, engine) -> None:
    svc = MemoryService(engine=engine, settings=settings)
    keys = keys_for(engine)
    add_card(engine, scenario="search 429", preconditions=['tool == "search"'])
    async with Client(create_mcp(svc, principal=svc.authenticate(keys["write"]))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == ALL_TOOLS
        assert tools["query_memory_cards"].output_schema is not None
        res = _data(
            await client.call_tool(
                "query_memory_cards",
                {"task_state": {"tool": "search"}, "explain": True, "prompt_tokens": 100},
            )
        )
        hit = res["cards"][0]
        assert hit["card"]["scenario"] == "search 429" and hit["checks"][0]["verdict"] == "held"
        assert "search 429" in res["prompt"]
        warn = _data(await client.call_tool("check_action", {"tool": "search"}))
        assert warn["warnings"][0]["mode"] == "rate limited"
        fb = _data(
            await client.call_tool(
                "update_card_confidence",
                {"card_id": hit["card"]["card_id"], "outcome": "success", "use_id": hit["use_id"]},
            )
        )
        assert fb["confidence"] == pytest.approx(0.75)
        stored = _data(
            await client.call_tool(
                "store_memory_card",
                {
                    "scenario": "payment declined",
                    "preconditions": ['last_error_code == "402"'],
                    "action_sequence": [{"tool": "ask_user", "note": "another card"}],
                    "failure_modes": [{"mode": "declined twice", "handling": "stop"}],
                    "confidence": 0.7,
                },
            )
        )
        # a non-admin key's card waits for a person; the origin names the key
        assert stored["provenance"]["via"] == "mcp" and stored["status"] == "review"
        assert stored["provenance"]["origin"] == "operator" and stored["provenance"]["key_id"]
        recent = _data(await client.call_tool("list_recent_cards", {"limit": 5}))
        assert "payment declined" not in {c["scenario"] for c in recent["result"]}
        fact = _data(
            await client.call_tool("memory_write", {"key": "user", "value": "prefers aisle seats"})
        )
        # like its cards, a non-admin key's fact waits in review: not served yet
        assert fact["status"] == "review"
        found = _data(await client.call_tool("memory_search", {"text": "aisle seats"}))
        assert found["result"] == []
        gone = _data(await client.call_tool("memory_forget", {"fact_id": fact["card_id"]}))
        assert gone["status"] != "active"
        bad = await client.call_tool("store_memory_card", {"scenario": "x", "action_sequence": []})
        assert bad.is_error
        bad = await client.call_tool(
            "update_card_confidence", {"card_id": "not-a-uuid", "outcome": "success"}
        )
        assert bad.is_error
    svc.close()


@pytest.mark.anyio
async def test_tool_auth_scopes_and_namespaces(settings, engine) -> None:
    svc = MemoryService(engine=engine, settings=settings)
    keys = keys_for(engine)
    other = add_card(engine, namespace="team-b", scenario="b only", preconditions=[])
    add_card(engine, scenario="a only", preconditions=[])
    calls = {
        "query_memory_cards": {"task_state": {}},
        "check_action": {"tool": "search"},
        "list_recent_cards": {},
        "memory_search": {"text": "x"},
        "update_card_confidence": {"card_id": str(other.card_id), "outcome": "success"},
        "store_memory_card": {
            "scenario": "s",
            "preconditions": [],
            "action_sequence": [{"tool": "t"}],
        },
        "memory_write": {"key": "k", "value": "v"},
        "memory_forget": {"fact_id": str(other.card_id)},
        "namespace_delete": {"confirm": "team-a"},
    }
    async with Client(create_mcp(svc)) as client:  # no key at all
        for name, args in calls.items():
            r = await client.call_tool(name, args)
            assert r.is_error and "unauthorized" in r.content[0].text, name
    async with Client(create_mcp(svc, principal=svc.authenticate(keys["writeonly"]))) as client:
        for name in ("query_memory_cards", "check_action", "list_recent_cards", "memory_search"):
            r = await client.call_tool(name, calls[name])
            assert r.is_error and "forbidden" in r.content[0].text, name
    async with Client(create_mcp(svc, principal=svc.authenticate(keys["read"]))) as client:
        for name in WRITE_TOOLS:
            r = await client.call_tool(name, calls[name])
            assert r.is_error and "forbidden" in r.content[0].text, name
        r = await client.call_tool("update_card_confidence", calls["update_card_confidence"])
        assert r.is_error and "'write' is needed" in r.content[0].text  # an outcome of no use
        served = {**calls["update_card_confidence"], "use_id": str(uuid.uuid4())}
        r = await client.call_tool("update_card_confidence", served)
        assert r.is_error and "notfound" in r.content[0].text  # team-b's card is not here
        res = _data(await client.call_tool("query_memory_cards", {"task_state": {}}))
        assert [h["card"]["scenario"] for h in res["cards"]] == ["a only"]
    async with Client(
        create_mcp(svc, principal=svc.authenticate(keys["admin"]), write_tools=False)
    ) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == ALL_TOOLS - WRITE_TOOLS
    svc.close()


@pytest.mark.anyio
async def test_an_admin_key_deletes_its_namespace_once_confirmed(settings, engine) -> None:
    svc = MemoryService(engine=engine, settings=settings)
    keys = keys_for(engine)
    add_card(engine, scenario="a only", preconditions=[])
    add_card(engine, namespace="team-b", scenario="b only", preconditions=[])
    async with Client(create_mcp(svc, principal=svc.authenticate(keys["admin"]))) as client:
        r = await client.call_tool("namespace_delete", {"confirm": "team-b"})
        assert r.is_error and "confirm must be this key's namespace" in r.content[0].text
        assert namespace_counts(engine, "team-a")[0].cards == {"active": 1}
        gone = _data(await client.call_tool("namespace_delete", {"confirm": "team-a"}))
        assert gone["namespace"] == "team-a" and gone["rows"]["card"] == 1
        assert gone["rows"]["api_key"] == 4  # read, write, admin and write-only
    assert namespace_counts(engine, "team-a") == []
    assert namespace_counts(engine, "team-b")[0].cards == {"active": 1}
    svc.close()


def test_stdio_server(settings, engine, env_for) -> None:
    add_card(engine, scenario="over stdio", preconditions=[])
    key = create_key(engine=engine, namespace="team-a", scopes=["read"])[1]
    exe = os.path.join(os.path.dirname(sys.executable), "hindsight")

    async def run() -> None:
        params = StdioServerParameters(
            command=exe, args=["mcp"], env={**env_for, "HINDSIGHT_API_KEY": key}
        )
        async with Client(params, read_timeout_seconds=60) as client:
            res = _data(await client.call_tool("query_memory_cards", {"task_state": {}}))
            assert res["cards"][0]["card"]["scenario"] == "over stdio"
            r = await client.call_tool("memory_write", {"key": "k", "value": "v"})
            assert r.is_error and "forbidden" in r.content[0].text

    import anyio

    anyio.run(run)


def test_stdio_server_without_a_key_exits_2_with_one_clear_line(env_for) -> None:
    import subprocess

    exe = os.path.join(os.path.dirname(sys.executable), "hindsight")
    env = {k: v for k, v in env_for.items() if k != "HINDSIGHT_API_KEY"}
    for extra in ({}, {"HINDSIGHT_API_KEY": "hs_not_a_key"}):
        # stdin stays open, as an MCP client's pipe does
        proc = subprocess.run(
            [exe, "mcp"],
            env={**env, **extra},
            input="",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
        assert "HINDSIGHT_API_KEY" in lines[0] and "Traceback" not in proc.stderr
        assert proc.stdout == ""  # nothing on the protocol stream


def test_streamable_http(settings, engine) -> None:
    svc = MemoryService(engine=engine, settings=settings)
    keys = keys_for(engine)
    add_card(engine, scenario="over http", preconditions=[])
    svc.start()
    with LiveServer(mcp_http_app(svc)) as server:
        url = f"{server.url}/mcp"

        async def run() -> None:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {keys['read']}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                res = _data(await client.call_tool("query_memory_cards", {"task_state": {}}))
                assert res["cards"][0]["card"]["scenario"] == "over http"
                r = await client.call_tool("memory_write", {"key": "k", "value": "v"})
                assert r.is_error and "forbidden" in r.content[0].text
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {keys['other']}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                res = _data(await client.call_tool("query_memory_cards", {"task_state": {}}))
                assert res["cards"] == []  # team-b sees none of team-a's cards

        import anyio

        anyio.run(run)
        init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"accept": "application/json, text/event-stream"}
        r = httpx.post(url, json=init, headers=headers)
        assert r.status_code == 401
        r = httpx.post(
            url,
            json=init,
            headers={**headers, "authorization": f"Bearer {keys['read']}", "host": "evil.example"},
        )
        assert r.status_code in (403, 421)  # DNS rebinding: a foreign Host is refused
    svc.close()


@hsettings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    namespaces=st.lists(
        st.text(
            st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=12
        ),
        min_size=2,
        max_size=4,
        unique=True,
    ).filter(lambda ns: all(n.strip() and n.isprintable() for n in ns)),
    state=st.dictionaries(
        st.sampled_from(["tool", "task_type", "last_error"]),
        # text a query accepts (NUL and lone surrogates are refused by name, tested apart)
        st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=8),
        max_size=3,
    ),
)
def test_namespaces_never_leak(engine, namespaces, state) -> None:
    """Whatever the namespaces and state, a key's answers hold only its own namespace."""
    svc = MemoryService(
        engine=engine, settings=__import__("memory_core.settings").settings.Settings()
    )
    for ns in namespaces:
        add_card(
            engine,
            namespace=ns,
            scenario=f"card of {json.dumps(ns)} {uuid.uuid4()}",
            preconditions=[],
        )
    for ns in namespaces:
        who = svc.authenticate(create_key(engine=engine, namespace=ns, scopes=["admin"])[1])
        res = svc.query(principal=who, request=QueryRequest(task_state=state, top_k=50))
        assert {h.card.namespace for h in res.cards} == {ns}
        assert {c.namespace for c in svc.list_cards(principal=who, limit=200)} == {ns}
        assert {c.namespace for c in svc.recent(principal=who, limit=200)} == {ns}
        for other in namespaces:
            if other != ns:
                ids = [c.card_id for c in svc.list_cards(principal=who, limit=200)]
                assert all(svc.get_card(principal=who, card_id=i).namespace == ns for i in ids)
    svc.close()
