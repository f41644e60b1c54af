"""`/metrics` in Prometheus text format: requests by route and status, latency histograms by
route, and cards by status (counted at scrape time, at most every few seconds).

The request hook is a plain ASGI wrapper (no BaseHTTPMiddleware task per request): it reads
a clock twice and bumps two children that were looked up once per route and status. Labels
use the route's path template (/v1/cards/{card_id}), never the raw path, so the number of
series stays fixed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

from fastapi import FastAPI, Response
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from memory_core.serve.service import MemoryService
from memory_core.status import card_counts

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# the API answers from memory in about a millisecond; the slow tail is what matters
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class CardsByStatus(Collector):
    """hindsight_cards{status=...}: one grouped count, reused for `cache_s` seconds."""

    def __init__(self, service: MemoryService, cache_s: float = 5.0) -> None:
        self.service, self.cache_s = service, cache_s
        self._at = -1e9
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            if time.monotonic() - self._at > self.cache_s:
                self._counts = card_counts(engine=self.service.engine)
                self._at = time.monotonic()
            counts = dict(self._counts)
        family = GaugeMetricFamily("hindsight_cards", "Cards by status", labels=["status"])
        for status, n in sorted(counts.items()):
            family.add_metric([status], n)
        yield family


class UseWriter(Collector):
    """The use writer's queue and totals: a queue that keeps growing is a writer falling
    behind (uses are dropped past its cap)."""

    def __init__(self, service: MemoryService) -> None:
        self.uses = service.uses

    def collect(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily("hindsight_uses_pending", "Uses queued, not yet written")
        pending.add_metric([], self.uses.pending)
        yield pending
        for name, value, doc in (
            ("hindsight_uses_written", self.uses.written, "Uses written"),
            ("hindsight_uses_dropped", self.uses.dropped, "Uses dropped past the queue's cap"),
            ("hindsight_uses_rejected", self.uses.rejected, "Uses the database refused"),
        ):
            family = CounterMetricFamily(name, doc)
            family.add_metric([], value)
            yield family


class RequestCounters:
    """The request counter and latency histogram, with each (method, route, status)'s
    children looked up once: shared by the wrapper and the hot route (memory_api/hot_query.py)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "hindsight_http_requests",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "hindsight_http_request_duration_seconds",
            "HTTP request latency by route",
            ["method", "route"],
            buckets=BUCKETS,
            registry=registry,
        )
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, method: str, route: str, status: int, elapsed: float) -> None:
        """Count one request and time it."""
        key = (method, route, status)
        children = self._children.get(key)
        if children is None:
            children = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(elapsed)


class RequestMetrics:
    """Pure ASGI wrapper counting and timing HTTP requests by route template."""

    def __init__(
        self,
        app: ASGIApp,
        registry: CollectorRegistry | None = None,
        *,
        counters: RequestCounters | None = None,
    ) -> None:
        self.app = app
        if counters is None:
            counters = RequestCounters(registry or CollectorRegistry())
        self.counters = counters

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # a crash before the response started

        async def send_and_see(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_and_see)
        finally:
            elapsed = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.counters.observe(scope["method"], route, status, elapsed)


def install_metrics(app: FastAPI, service: MemoryService) -> RequestCounters:
    """Add the request wrapper and the GET /metrics route to the app (a registry of its own,
    so two apps in one process never share counters); returns the counters."""
    registry = CollectorRegistry()
    registry.register(CardsByStatus(service))
    registry.register(UseWriter(service))
    counters = RequestCounters(registry)
    app.add_middleware(RequestMetrics, counters=counters)

    @app.get("/metrics", tags=["health"], include_in_schema=False)
    def metrics() -> Response:
        """Prometheus text format."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return counters
