"""`/metrics` on the read API: Prometheus text with request counts, latency, cards by status."""

from __future__ import annotations

import asyncio
import time

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from memory_api.app import create_app
from memory_api.metrics import RequestMetrics
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card, keys_for


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_requests_by_route_and_cards_by_status(settings, engine) -> None:
    a = add_card(engine, scenario="one")
    add_card(engine, scenario="two")
    add_card(engine, scenario="three", status="review")
    keys = keys_for(engine)
    svc = MemoryService(engine=engine, settings=settings)
    with LiveServer(create_app(svc)) as server, httpx.Client(base_url=server.url) as c:
        auth = {"Authorization": f"Bearer {keys['read']}"}
        for _ in range(2):
            assert c.get(f"/v1/cards/{a.card_id}", headers=auth).status_code == 200
        assert c.get(f"/v1/cards/{a.card_id}").status_code == 401
        assert c.get("/no/such/route").status_code == 404
        r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    got = _samples(r.text)
    route = "/v1/cards/{card_id}"
    ok = (("method", "GET"), ("route", route), ("status", "200"))
    assert got[("hindsight_http_requests_total", ok)] == 2
    assert got[("hindsight_http_requests_total", (*ok[:2], ("status", "401")))] == 1
    unmatched = (("method", "GET"), ("route", "unmatched"), ("status", "404"))
    assert got[("hindsight_http_requests_total", unmatched)] == 1
    assert got[("hindsight_http_request_duration_seconds_count", ok[:2])] == 3
    assert got[("hindsight_cards", (("status", "active"),))] == 2
    assert got[("hindsight_cards", (("status", "review"),))] == 1
    assert str(a.card_id) not in r.text  # labels carry the route template, not the path


def test_request_hook_costs_microseconds() -> None:
    """The hook on the hot path: two clock reads, one dict lookup, two bumps."""

    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200})

    class Route:
        path = "/v1/cards/query"

    wrapped = RequestMetrics(app, CollectorRegistry())
    scope = {"type": "http", "method": "POST", "route": Route()}

    async def send(message) -> None:
        return None

    async def run(n: int, target) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await target(scope, None, send)
        return (time.perf_counter() - start) / n

    n = 20_000
    bare = asyncio.run(run(n, app))
    hooked = asyncio.run(run(n, wrapped))
    extra_us = (hooked - bare) * 1e6
    print(f"metrics hook: {extra_us:.1f} us per request")
    assert extra_us < 50


def test_the_use_writers_queue_and_totals_are_in_metrics_and_readiness(settings, engine) -> None:
    """An operator sees a writer falling behind: uses queued, written and dropped."""
    add_card(engine, scenario="one")
    keys = keys_for(engine)
    svc = MemoryService(engine=engine, settings=settings)
    with LiveServer(create_app(svc)) as server, httpx.Client(base_url=server.url) as c:
        auth = {"Authorization": f"Bearer {keys['read']}"}
        body = {"task_state": {"tool": "search", "retry_count": 0}}
        served = 0
        for _ in range(5):
            r = c.post("/v1/cards/query", json=body, headers=auth)
            served += len(r.json()["cards"])
        svc.uses.flush()
        ready = c.get("/readyz").json()
        got = _samples(c.get("/metrics").text)
    assert served == 5  # the card held each time
    assert (ready["uses_written"], ready["uses_pending"]) == (5, 0)
    assert got[("hindsight_uses_written_total", ())] == 5
    assert got[("hindsight_uses_pending", ())] == 0
    assert got[("hindsight_uses_dropped_total", ())] == 0
    assert got[("hindsight_uses_rejected_total", ())] == 0
