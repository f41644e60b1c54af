"""Hard edges at the HTTP layer: query strings the database cannot compare, and 422 answers
that never echo the raw input (a lone surrogate or a NaN in it made the error itself a 500)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_api.errors import BAD_QUERY_STRING, SCHEMA_MISMATCH
from memory_core.errors import InvalidInput
from memory_core.ingest.limits import clean_query_text, printable


def _errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {
            "type": e.get("type", "value_error"),
            "loc": [p if isinstance(p, int) else printable(str(p)) for p in e.get("loc", ())],
            "msg": printable(str(e.get("msg", ""))),
        }
        for e in exc.errors()
    ]


def install_guards(app: FastAPI) -> None:
    """422s without the input echoed, and the query-string check (400 naming the parameter)."""

    async def invalid(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse({"detail": _errors(exc), "code": SCHEMA_MISMATCH}, status_code=422)

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_middleware(QueryGuard)


class QueryGuard:
    """Refuse (400) query parameters holding NUL or lone surrogates, or over-long ones."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("query_string", b"") if scope["type"] == "http" else b""
        if raw:
            try:
                pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True, errors="strict")
                for name, value in pairs:
                    clean_query_text(name, field="query")
                    clean_query_text(value, field=name)
            except UnicodeDecodeError:
                await _refuse(send, "query string is not UTF-8", "query")
                return
            except InvalidInput as exc:
                await _refuse(send, str(exc), printable(exc.field or "query"))
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, detail: str, field: str) -> None:
    response = JSONResponse(
        {"detail": printable(detail), "field": field, "code": BAD_QUERY_STRING}, status_code=400
    )
    await send({"type": "http.response.start", "status": 400, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})
