"""Every answer the API gives, in its OpenAPI schema: errors documented per route."""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute, APIRouter
from pydantic import BaseModel, Field

from memory_api.errors import ERROR_CODES


class ErrorAnswer(BaseModel):
    """A refusal: what is wrong, a stable code to branch on, and the field when there is one."""

    detail: str
    code: str = Field(description="one of: " + ", ".join(ERROR_CODES))
    field: str | None = None


def _answer(description: str) -> dict[str, Any]:
    return {"model": ErrorAnswer, "description": description}


# what every authenticated route can answer
COMMON: dict[int | str, dict[str, Any]] = {
    400: _answer("bad input: the message names the field (query strings included)"),
    401: _answer("no key, or an unknown or revoked key"),
    403: _answer("the key lacks the scope this route needs"),
    413: _answer("request body over serve.max_body_bytes"),
    422: {"description": "the body or a parameter does not fit the schema (code: schema_mismatch)"},
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: _answer("no such card or fact in the key's namespace")
}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: _answer("the same card is already live, or it changed meanwhile: retry")
}


_READS = {"query_cards", "check_action", "search_facts"}  # POSTs that change nothing


def document_answers(router: APIRouter) -> None:
    """Add the error answers to each route of a router (before the app includes it)."""
    for route in router.routes:
        if not isinstance(route, APIRoute):
            continue
        path = route.path
        if path == "/readyz":
            route.responses.setdefault(503, _answer("the database does not answer"))
            continue
        if not path.startswith("/v1/"):
            continue
        extra: dict[int | str, dict[str, Any]] = dict(COMMON)
        if "{" in path:
            extra.update(NOT_FOUND)
        if (route.methods or set()) & {"POST", "DELETE"} and route.name not in _READS:
            extra.update(CONFLICT)
        for code, answer in extra.items():
            route.responses.setdefault(code, answer)
