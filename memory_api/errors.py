"""Hindsight errors as HTTP answers, and the request body limit (413)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_core.errors import (
    ConcurrentUpdate,
    Conflict,
    Forbidden,
    HindsightError,
    InvalidInput,
    NotFound,
    Unauthorized,
)

# each error's HTTP status and its stable `code` (clients branch on the code, not the message)
STATUS: list[tuple[type[HindsightError], int, str]] = [
    (Unauthorized, 401, "unauthorized"),
    (Forbidden, 403, "forbidden"),
    (NotFound, 404, "not_found"),
    (Conflict, 409, "conflict"),
    (ConcurrentUpdate, 409, "changed_meanwhile"),
    (InvalidInput, 400, "invalid_input"),
]
# the codes of refusals made before a route runs
BODY_TOO_LARGE, BODY_TOO_DEEP, BAD_QUERY_STRING, SCHEMA_MISMATCH = (
    "body_too_large",
    "body_too_deep",
    "bad_query_string",
    "schema_mismatch",
)
DATABASE_DOWN = "database_unavailable"  # /readyz's 503
# answers the framework gives by status (a body that does not parse, an unknown route, ...)
HTTP_CODES = {
    400: "unparsable_body",
    404: "not_found",
    405: "method_not_allowed",
    413: BODY_TOO_LARGE,
    415: "unsupported_media_type",
}
HTTP_OTHER, INTERNAL = "http_error", "internal_error"
ERROR_CODES = (
    *(code for *_, code in STATUS),
    "refused",
    BODY_TOO_LARGE,
    BODY_TOO_DEEP,
    BAD_QUERY_STRING,
    SCHEMA_MISMATCH,
    DATABASE_DOWN,
    *sorted(set(HTTP_CODES.values()) - {BODY_TOO_LARGE, "not_found"}),
    HTTP_OTHER,
    INTERNAL,
)


def status_of(exc: HindsightError) -> int:
    """The HTTP status of a Hindsight error (400 for any other refusal)."""
    return next((status for kind, status, _ in STATUS if isinstance(exc, kind)), 400)


def code_of(exc: HindsightError) -> str:
    """The stable code of a Hindsight error ("refused" for any other refusal)."""
    return next((code for kind, _, code in STATUS if isinstance(exc, kind)), "refused")


def install_error_handlers(app: FastAPI) -> None:
    """Translate Hindsight errors into 4xx answers with the message."""

    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HindsightError)
        code = status_of(exc)
        headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
        body: dict[str, Any] = {"detail": str(exc), "code": code_of(exc)}
        if isinstance(exc, InvalidInput) and exc.field:
            body["field"] = exc.field
        return JSONResponse(body, status_code=code, headers=headers)

    async def framework(_request: Request, exc: Exception) -> JSONResponse:
        # FastAPI's own refusals (a body that is not JSON or not UTF-8, a number past the
        # parser's digits, no such route) keep their status and get a code like every other
        assert isinstance(exc, StarletteHTTPException)
        detail = exc.detail
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            detail = "the body does not parse as JSON (not UTF-8, or malformed)"
        code = HTTP_CODES.get(exc.status_code, HTTP_OTHER)
        return JSONResponse(
            {"detail": detail, "code": code}, status_code=exc.status_code, headers=exc.headers
        )

    async def crashed(_request: Request, exc: Exception) -> JSONResponse:
        # the server's fault: the body still carries a code; Starlette logs the exception
        return JSONResponse({"detail": "internal server error", "code": INTERNAL}, status_code=500)

    app.add_exception_handler(HindsightError, handle)
    app.add_exception_handler(StarletteHTTPException, framework)
    app.add_exception_handler(Exception, crashed)


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


def nesting_beyond(body: bytes, limit: int) -> int | None:
    """The byte offset where a JSON body nests deeper than limit, or None (strings skipped)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return None  # too few brackets to go that deep: the common case costs two counts
    depth = 0
    # strings blanked to the same length, so offsets stay those of the body
    flat = _JSON_STRING.sub(lambda m: b" " * len(m.group()), body)
    for m in _BRACKET.finditer(flat):
        depth += 1 if m.group() in (b"[", b"{") else -1
        if depth > limit:
            return m.start()
    return None


class BodyLimit:
    """Refuse request bodies over max_bytes with 413, declared or streamed, and JSON nested
    deeper than the parser can take with a 400 that says so (not a generic parse error)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, max_depth: int = 500) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(send)
            return
        # read the body up front (it is small by construction) and replay it
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        kind = dict(scope.get("headers") or []).get(b"content-type", b"")
        # a binary body (OTLP protobuf) holds bracket bytes that are no nesting at all
        binary = kind.split(b";")[0].strip().lower() == b"application/x-protobuf"
        deep = None if binary else nesting_beyond(body, self.max_depth)
        if deep is not None:
            detail = f"the JSON body nests deeper than {self.max_depth} levels (at byte {deep})"
            await _answer(send, 400, detail, BODY_TOO_DEEP)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        await _answer(send, 413, f"request body larger than {self.max_bytes} bytes", BODY_TOO_LARGE)


async def _answer(send: Send, status: int, detail: str, code: str) -> None:
    response = JSONResponse({"detail": detail, "code": code}, status_code=status)
    await send({"type": "http.response.start", "status": status, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})
