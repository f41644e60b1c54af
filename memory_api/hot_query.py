"""The hot route without the framework: a warm plain `POST /v1/cards/query` answered by a pure
ASGI layer in front of the whole middleware stack, before routing, dependency solving and the
error, metrics, query-string and body-limit layers.

In process at 5,000 cards the service answered a warm query in ~0.3 ms and the route around
it cost as much again (route matching over every router, two dependency solves, the body
parsed, a Response built); the layers around the route cost ~25 us more. This layer is the
outermost of the app's stack and takes a request only when everything is known to be quick,
current and within those layers' rules: no query string (the guard's concern), the whole
body in one message within the body limit (declared and read), a cached key, a JSON body
that validates as a QueryRequest (no deeper than the limit: the model refuses what nests past
its depth). A query the service answers inline (memory_core/serve/inline.py) is answered on
the loop; any other valid query of a cached key (explain, a prompt, a snapshot to load, a feed
read due) runs in a worker thread, as the route would run it, without the stack around it:
on the mix of bench/scale_http.py that stack cost more of the loop's CPU than the explained
queries' own work. It counts and times what it answers under the route, as the metrics layer
would. Anything else (no key, an unknown key, a body that does not validate, an error the
service raises) goes down the stack with the body replayed, and is answered (or refused)
exactly as before: the answers it gives are the route's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson
from anyio import to_thread
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_api.metrics import RequestCounters
from memory_core.errors import HindsightError
from memory_core.serve.schemas import CLEAN_BODY, QueryRequest, clean_bytes
from memory_core.serve.service import MemoryService

PATH = "/v1/cards/query"
_JSON = (b"content-type", b"application/json")


class HotQuery:
    """Answers warm plain queries itself; passes every other request on untouched."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        service: MemoryService,
        route: Any,
        counters: RequestCounters,
        max_bytes: int,
    ) -> None:
        self.app = app
        self.service = service
        self.route = route  # the route's own object: metrics label the request by its path
        self.counters = counters
        self.max_bytes = max_bytes
        self.answered = 0  # on the loop
        self.threaded = 0  # in a worker thread

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != PATH
            or scope["method"] != "POST"
            or scope.get("query_string")
        ):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        first = await receive()
        whole = first["type"] == "http.request" and not first.get("more_body", False)
        try:
            answer = self._answer(scope, first.get("body", b"")) if whole else None
            threaded = callable(answer)
            if callable(answer):
                answer = await to_thread.run_sync(answer)
        except BaseException:
            # a crash: uvicorn answers 500, counted as the metrics layer counted one
            self.counters.observe("POST", "unmatched", 500, time.perf_counter() - start)
            raise
        if answer is None:
            await self.app(scope, _replay(first, receive), send)
            return
        self.threaded += threaded
        self.answered += not threaded
        scope["route"] = self.route
        length = (b"content-length", str(len(answer)).encode())
        await send({"type": "http.response.start", "status": 200, "headers": [length, _JSON]})
        await send({"type": "http.response.body", "body": answer})
        self.counters.observe("POST", self.route.path, 200, time.perf_counter() - start)

    def _answer(self, scope: Scope, body: bytes) -> bytes | Callable[[], bytes | None] | None:
        """The answer when this is a warm plain query of a cached key; for any other valid
        query of a cached key, how to answer it in a worker thread; else None (nothing
        recorded: the stack answers it)."""
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if len(body) > self.max_bytes or (
            declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes)
        ):
            return None  # the body limit refuses it
        if headers.get(b"content-type", b"application/json").split(b";")[0].strip() not in (
            b"application/json",
        ):
            return None
        scheme, _, secret = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        key = secret.strip()
        principal = self.service.keys.known(key) if scheme.lower() == "bearer" and key else None
        if principal is None:  # the route checks it (a read, or a refusal)
            return None
        try:
            # parsed as the route parses it: JSON to Python, then the model in Python mode
            # (check_json's walk skipped when the bytes alone show it would pass)
            clean = CLEAN_BODY if clean_bytes(body) else None
            request = QueryRequest.model_validate(orjson.loads(body), context=clean)
            answer = self.service.query_json_now(principal=principal, request=request)
        except (HindsightError, ValidationError, orjson.JSONDecodeError):
            return None  # the route answers with its own error
        return answer if answer is not None else partial(self._threaded, principal, request)

    def _threaded(self, principal: Any, request: QueryRequest) -> bytes | None:
        """The route's `query_json`, in a worker thread; None on the service's refusal (the
        scope checked before any work: the route then answers with its own error)."""
        try:
            return self.service.query_json(principal=principal, request=request)
        except HindsightError:
            return None


def _replay(first: Message, receive: Receive) -> Receive:
    """receive, with the message already read given again first."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return first
        return await receive()

    return replay
