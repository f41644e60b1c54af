"""What the sync and async clients share: the connection settings and reading an answer."""

from __future__ import annotations

from typing import Any, TypeVar, cast

import httpx

from hindsight.client.calls import Call
from hindsight.client.errors import error_for
from hindsight.client.retry import RetryPolicy

T = TypeVar("T")
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


def client_options(
    base_url: str, api_key: str | None, timeout: float | httpx.Timeout | None
) -> dict[str, Any]:
    """httpx client options: the base URL, the bearer key, the timeouts."""
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    headers["User-Agent"] = "hindsight-client/0.1"
    return {
        "base_url": base_url.rstrip("/"),
        "headers": headers,
        "timeout": DEFAULT_TIMEOUT if timeout is None else timeout,
    }


def request_args(call: Call[Any]) -> dict[str, Any]:
    """httpx request arguments for a call."""
    args: dict[str, Any] = {"method": call.route.method, "url": call.path}
    if call.params:
        args["params"] = list(call.params)
    if call.content is not None:
        args["content"] = call.content
    elif call.json is not None:
        args["json"] = call.json
    if call.headers:
        args["headers"] = dict(call.headers)
    return args


def read_answer(call: Call[T], response: httpx.Response) -> T:
    """The call's typed answer, or the API's refusal raised as its exception."""
    if response.status_code >= 400:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        raise error_for(response.status_code, body)
    if call.raw:
        return cast(T, response.content)
    return call.answer.validate_json(response.content)


__all__ = ["DEFAULT_TIMEOUT", "RetryPolicy", "client_options", "read_answer", "request_args"]
