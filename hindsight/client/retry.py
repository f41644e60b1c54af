"""When the clients send a request again, and after how long."""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass

import httpx

# refused before any work was done: safe to send again whatever the operation
_REFUSED = {429, 503}
# the answer was lost on the way (a proxy gave up): only an idempotent operation is resent
_LOST = {502, 504}


@dataclass(frozen=True)
class RetryPolicy:
    """attempts: sends in all (1: no retry); backoff_s doubles per retry up to max_delay_s; a
    server's Retry-After is honoured up to max_delay_s."""

    attempts: int = 4
    backoff_s: float = 0.5
    max_delay_s: float = 30.0

    def backoff(self, retry: int) -> float:
        """The pause before retry number `retry` (0 for the first) without a Retry-After."""
        return float(min(self.max_delay_s, self.backoff_s * 2**retry))

    def after_answer(
        self, response: httpx.Response, *, retry: int, idempotent: bool
    ) -> float | None:
        """The pause before sending again after this answer, or None: do not retry."""
        if retry + 1 >= self.attempts:
            return None
        status = response.status_code
        if status not in _REFUSED and not (idempotent and status in _LOST):
            return None
        asked = retry_after(response.headers.get("retry-after"))
        return min(self.max_delay_s, asked) if asked is not None else self.backoff(retry)

    def after_error(
        self, exc: httpx.TransportError, *, retry: int, idempotent: bool
    ) -> float | None:
        """The pause before sending again after a transport error, or None: do not retry."""
        if retry + 1 >= self.attempts:
            return None
        # nothing reached the server: always safe; otherwise (a read timeout, a dropped
        # connection) the request may have been applied
        unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
        return self.backoff(retry) if unsent or idempotent else None


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (a number of seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
