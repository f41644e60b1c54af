"""The typed client against a real uvicorn server: every route, its errors, its retries."""

from __future__ import annotations

import inspect
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import pytest

from hindsight.client import (
    ROUTES,
    AsyncClient,
    CardIn,
    CheckActionRequest,
    Client,
    Conflict,
    FactIn,
    FactSearchRequest,
    FeedbackRequest,
    Forbidden,
    InvalidRequest,
    NotFound,
    OutcomeRequest,
    PinRequest,
    QueryRequest,
    RateLimited,
    RejectRequest,
    RetryPolicy,
    ServerError,
    TransportError,
    Unauthorized,
)
from memory_api.app import create_app
from memory_core.serve.service import MemoryService
from tests.helpers.net import free_port
from tests.helpers.serve import LiveServer, keys_for

CARD = CardIn.model_validate(
    {
        "scenario": "search answers 429 on a big page",
        "preconditions": ['tool == "search"', "retry_count < 3"],
        "action_sequence": [{"tool": "search", "note": "page size 10"}],
        "failure_modes": [{"mode": "rate limited", "handling": "wait 2 s, then retry"}],
        "confidence": 0.8,
    }
)
FAST = RetryPolicy(attempts=3, backoff_s=0.01, max_delay_s=0.5)


@pytest.fixture
def api(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    with LiveServer(create_app(svc)) as server:
        yield server, keys_for(engine)


def test_client_covers_every_route_of_the_openapi_schema(api) -> None:
    server, _ = api
    schema = httpx.get(f"{server.url}/openapi.json", timeout=120).json()
    documented = {
        (method.upper(), path): op["operationId"]
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
    }
    assert {(r.method, r.path): name for name, r in ROUTES.items()} == documented
    for name in ROUTES:
        assert callable(getattr(Client, name)), name
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name


def test_sync_client_every_operation(api) -> None:
    server, keys = api
    with Client(server.url, keys["admin"]) as admin, Client(server.url, keys["write"]) as writer:
        assert admin.healthz() == {"status": "ok"} and "database" in admin.readyz()
        card = admin.store_card(CARD)
        assert card.status == "active" and card.provenance["operator"] is True
        with pytest.raises(Conflict) as conflict:
            admin.store_card(CARD)
        assert conflict.value.status == 409 and conflict.value.code == "conflict"
        state = {"tool": "search", "retry_count": 0}
        found = writer.query_cards(QueryRequest(task_state=state, explain=True))
        assert [h.card.card_id for h in found.cards] == [card.card_id]
        use_id = found.cards[0].use_id
        assert use_id is not None and found.query_id is not None
        checked = writer.check_action(CheckActionRequest(tool="search", task_state=state))
        assert checked.warnings[0]["mode"] == "rate limited"
        fed = writer.feedback(card.card_id, FeedbackRequest(outcome="success", use_id=use_id))
        assert fed.recorded and fed.confidence > card.confidence
        outcome = writer.report_outcome(found.query_id, OutcomeRequest(outcome="success"))
        assert outcome.query_id == found.query_id
        assert admin.get_card(str(card.card_id)).success_count == 1
        assert [v.actor.split(":")[0] for v in admin.card_history(card.card_id)] == ["key"]
        assert [c.card_id for c in admin.list_cards(status=["active"], q="search")] == [
            card.card_id
        ]
        assert admin.recent_cards(limit=1)[0].card_id == card.card_id
        assert admin.pin_card(card.card_id, PinRequest(pinned=True)).card_id == card.card_id
        assert admin.effects(limit=5) is not None
        fact = admin.write_fact(FactIn(key="project", query="database", value="PostgreSQL 15"))
        hits = writer.search_facts(FactSearchRequest(text="which database"))
        assert [h.fact.value for h in hits] == ["PostgreSQL 15"]
        mine = writer.store_card(CARD.model_copy(update={"scenario": "a write key's card"}))
        other = writer.store_card(CARD.model_copy(update={"scenario": "another one"}))
        assert [c.card_id for c in admin.review_queue()] == [mine.card_id, other.card_id]
        assert admin.approve(mine.card_id).status == "active"
        assert admin.reject(other.card_id, RejectRequest(reason="a duplicate")).status == (
            "rejected"
        )
        assert writer.forget_fact(fact.card_id).card_id == fact.card_id
        run = {
            "id": "run-1",
            "steps": [{"type": "tool_call", "tool": "search", "args": {}, "observation": "ok"}],
            "outcome": "success",
        }
        assert writer.ingest(run).stored == 1 and writer.ingest([run]).duplicates == 1
        export = admin.namespace_export()
        header, *records = [json.loads(line) for line in export.splitlines()]
        assert header and any(str(card.card_id) in json.dumps(r) for r in records)
        again = admin.namespace_import(export)  # the namespace holds it all: nothing added
        assert again.namespace == "team-a" and sum(again.read.values()) == len(records)
        assert not any(again.added.values())
        shown = admin.namespace_show()
        assert shown.namespace == "team-a" and shown.trajectories == 1
        gone = admin.namespace_delete()
        assert gone.namespace == "team-a" and gone.rows["trajectory"] == 1


def test_refusals_are_typed_exceptions(api) -> None:
    server, keys = api
    with Client(server.url) as anonymous, pytest.raises(Unauthorized) as no_key:
        anonymous.recent_cards()
    assert no_key.value.status == 401 and no_key.value.code == "unauthorized"
    with Client(server.url, keys["read"]) as reader:
        with pytest.raises(Forbidden, match="write"):
            reader.store_card(CARD)
        with pytest.raises(NotFound):
            reader.get_card("00000000-0000-0000-0000-000000000001")
        with pytest.raises(InvalidRequest) as bad:
            reader.list_cards(kind="nonsense")
        assert bad.value.status == 422 and bad.value.code == "schema_mismatch"
    with Client(server.url, keys["write"]) as writer, pytest.raises(InvalidRequest) as refused:
        writer.store_card(CARD.model_copy(update={"preconditions": ["tool =="]}))
    assert refused.value.status == 400 and "does not compile" in str(refused.value.detail)


def test_async_client(api) -> None:
    server, keys = api

    async def main() -> None:
        async with AsyncClient(server.url, keys["admin"]) as admin:
            card = await admin.store_card(CARD)
            state = {"tool": "search", "retry_count": 1}
            hits = await admin.query_cards(QueryRequest(task_state=state))
            assert [h.card.card_id for h in hits.cards] == [card.card_id]
            got = await admin.check_action(CheckActionRequest(tool="search", task_state=state))
            assert got.warnings
            with pytest.raises(NotFound):
                await admin.card_history("00000000-0000-0000-0000-000000000001")
            export = await admin.namespace_export(with_trajectories=True)
            assert str(card.card_id).encode() in export
            assert not any((await admin.namespace_import(export)).added.values())

    anyio.run(main)


class Flaky:
    """A real HTTP server that answers the first `fail` requests with `status` (and a
    Retry-After), then relays to the API: counts what it got."""

    def __init__(self, upstream: str, *, status: int, fail: int, retry_after: str = "0") -> None:
        self.hits: list[float] = []
        me = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                me.hits.append(time.monotonic())
                if len(me.hits) <= fail:
                    self.send_response(status)
                    self.send_header("Retry-After", retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"detail": "busy", "code": "http_error"}')
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                r = httpx.request(self.command, upstream + self.path, headers=headers, content=body)
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("content-type", "text/plain"))
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("settings", ["sqlite"], indirect=True)
def test_transient_answers_are_retried_as_the_operation_allows(api) -> None:
    server, keys = api
    state = QueryRequest(task_state={"tool": "search"})
    busy = Flaky(server.url, status=429, fail=2, retry_after="1")
    try:
        with Client(busy.url, keys["read"], retry=FAST) as c:
            assert c.query_cards(state).cards == []  # a 429 is a refusal: retried for any
        assert len(busy.hits) == 3
        # Retry-After (1 s) honoured up to the policy's cap (0.5 s)
        assert 0.45 <= busy.hits[1] - busy.hits[0] < 1.0
    finally:
        busy.close()
    gateway = Flaky(server.url, status=502, fail=1)
    try:
        with Client(gateway.url, keys["write"], retry=FAST) as c:
            with pytest.raises(ServerError) as lost:  # a store may have happened: not resent
                c.store_card(CARD)
            assert lost.value.status == 502 and len(gateway.hits) == 1
            assert c.recent_cards() == []  # a read is resent after a 502
        assert len(gateway.hits) == 2
    finally:
        gateway.close()
    down = Flaky(server.url, status=503, fail=10)
    try:
        with Client(down.url, keys["read"], retry=FAST) as c, pytest.raises(ServerError):
            c.recent_cards()
        assert len(down.hits) == FAST.attempts
    finally:
        down.close()
    limited = Flaky(server.url, status=429, fail=10)
    try:
        with Client(limited.url, keys["read"], retry=FAST) as c, pytest.raises(RateLimited):
            c.recent_cards()
    finally:
        limited.close()


def test_unreachable_server_and_timeouts_raise_transport_error() -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    with Client(f"http://127.0.0.1:{port}", "k", retry=FAST) as c, pytest.raises(TransportError):
        c.healthz()
    assert time.monotonic() - started >= 0.03  # two pauses (0.01 s, 0.02 s) between three tries
    with pytest.raises(ValueError, match="http"):
        Client("127.0.0.1:8765")


def test_a_slow_server_times_out() -> None:
    release = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            release.wait(5)
            self.send_response(200)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        one = RetryPolicy(attempts=1)
        with Client(url, "k", timeout=0.3, retry=one) as c, pytest.raises(TransportError):
            c.healthz()
    finally:
        release.set()
        server.shutdown()
        server.server_close()
