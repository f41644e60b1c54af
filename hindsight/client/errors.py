"""The API's refusals as exceptions: one class per stable `code`, plus transport failures."""

from __future__ import annotations

from typing import Any


class HindsightAPIError(Exception):
    """An answer of 4xx or 5xx: its status, stable `code`, message and field (if named)."""

    def __init__(self, status: int, code: str, detail: Any, field: str | None = None) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        where = f" (field {field})" if field else ""
        super().__init__(f"{status} {code}: {detail}{where}")


class Unauthorized(HindsightAPIError):
    """No key, or an unknown or revoked one (401)."""


class Forbidden(HindsightAPIError):
    """The key lacks the scope the operation needs (403)."""


class NotFound(HindsightAPIError):
    """No such card, fact, use or route in the key's namespace (404)."""


class Conflict(HindsightAPIError):
    """The same card is already live (409 `conflict`)."""


class ChangedMeanwhile(Conflict):
    """Someone changed the card between read and write (409 `changed_meanwhile`): retry."""


class InvalidRequest(HindsightAPIError):
    """The request was refused as it stands (400, 413, 415, 422): fix it, do not retry."""


class RateLimited(HindsightAPIError):
    """Too many requests (429), after the client's retries ran out."""


class ServerError(HindsightAPIError):
    """The server failed (500) or is unavailable (502/503/504) after the retries ran out."""


class TransportError(Exception):
    """The server could not be reached (connect error, timeout) after the retries ran out."""


_BY_CODE: dict[str, type[HindsightAPIError]] = {
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "changed_meanwhile": ChangedMeanwhile,
}
_BY_STATUS: dict[int, type[HindsightAPIError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: RateLimited,
}


def error_for(status: int, body: Any) -> HindsightAPIError:
    """The exception for an error answer: by its `code` first, then by its status."""
    code, detail, field = "http_error", body, None
    if isinstance(body, dict):
        code = str(body.get("code") or code)
        detail = body.get("detail", body)
        field = body.get("field") if isinstance(body.get("field"), str) else None
    kind = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if kind is None:
        kind = ServerError if status >= 500 else InvalidRequest
    return kind(status, code, detail, field)
