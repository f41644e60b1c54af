"""A scripted OpenAI-compatible HTTP server: real sockets, real `openai` client on the other end.

It stands in for the external LLM service only. A `responder` decides each answer from the
request (valid JSON, broken JSON, 429, 500, a stall, an empty list...); every request is
recorded so tests can count calls. With `api_key` set it checks the bearer key like a real
endpoint (401 otherwise), for chat and embeddings alike; /embeddings answers a hashed
bag-of-words vector per text.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: content for a 200, or an error status; optional delay first."""

    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    error: str = "scripted error"
    prompt_tokens: int | None = None
    completion_tokens: int = 50


Responder = Callable[[dict[str, Any], int], Reply]
EMBED_DIM = 64


def embed_text(text: str) -> list[float]:
    """A deterministic unit vector: words hashed into EMBED_DIM buckets."""
    vec = [0.0] * EMBED_DIM
    for word in re.findall(r"\w+", text.lower()):
        vec[int(hashlib.sha256(word.encode()).hexdigest(), 16) % EMBED_DIM] += 1.0
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / norm for x in vec]


@dataclass
class ScriptedLLM:
    """Start with `with ScriptedLLM(responder) as llm:`; point clients at `llm.url`."""

    responder: Responder
    latency_s: float = 0.0
    reject_json_schema: bool = False
    reject_status: int = 400  # llama.cpp's server says 500
    api_key: str | None = None  # set: every request must carry "Authorization: Bearer <key>"
    requests: list[dict[str, Any]] = field(default_factory=list)
    embed_requests: list[dict[str, Any]] = field(default_factory=list)
    unauthorized: list[str] = field(default_factory=list)  # the keys refused (masked)
    in_flight: int = 0
    max_in_flight: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> ScriptedLLM:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if server.api_key is not None:
                    sent = self.headers.get("Authorization", "")
                    if sent != f"Bearer {server.api_key}":
                        with server._lock:
                            server.unauthorized.append(sent[:12])
                        return self._send(
                            401,
                            {
                                "error": {
                                    "message": "Incorrect API key provided",
                                    "type": "invalid_request_error",
                                    "code": "invalid_api_key",
                                }
                            },
                        )
                if self.path.rstrip("/").endswith("/embeddings"):
                    return self._embed(body)
                with server._lock:
                    server.requests.append(body)
                    n = len(server.requests)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self._counted = True
                try:
                    self._answer(body, n)
                finally:
                    self._release()

            def _release(self) -> None:
                # a call ends when its answer starts going out: the client may send its next
                # call before this thread gets here again, and that must not count as overlap
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, body: dict[str, Any], n: int) -> None:
                fmt = (body.get("response_format") or {}).get("type")
                if server.reject_json_schema and fmt == "json_schema":
                    return self._send(
                        server.reject_status,
                        {
                            "error": {
                                "message": "response_format json_schema is not supported",
                                "type": "invalid_request_error",
                            }
                        },
                    )
                reply = server.responder(body, n)
                wait = server.latency_s + reply.delay_s
                if wait and server._stop.wait(wait):
                    return
                if reply.status != 200:
                    return self._send(
                        reply.status, {"error": {"message": reply.error, "type": "scripted"}}
                    )
                prompt = sum(len(m.get("content") or "") for m in body["messages"]) // 4
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{n}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": reply.content},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": reply.prompt_tokens or prompt,
                            "completion_tokens": reply.completion_tokens,
                            "total_tokens": (reply.prompt_tokens or prompt)
                            + reply.completion_tokens,
                        },
                    },
                )

            def _embed(self, body: dict[str, Any]) -> None:
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                with server._lock:
                    server.embed_requests.append(body)
                self._send(
                    200,
                    {
                        "object": "list",
                        "model": body.get("model", "scripted-embed"),
                        "data": [
                            {"object": "embedding", "index": i, "embedding": embed_text(t)}
                            for i, t in enumerate(texts)
                        ],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self._release()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing left to tell it

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        """The base URL for an OpenAI client."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def calls(self, marker: str | None = None) -> int:
        """Requests so far (whose system prompt contains `marker`, when given)."""
        with self._lock:
            return sum(
                1
                for r in self.requests
                if marker is None or marker in (r["messages"][0].get("content") or "")
            )

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
