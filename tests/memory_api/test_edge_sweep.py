"""Hand-made edge input on every route of the API's schema, on a real server and both
databases: a body that is not UTF-8, integers past any column, numbers past the parser's
digits, and searches of a namespace whose facts have no word to index. No answer is a 5xx
and every refusal carries a `code` the API documents."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from memory_api.app import create_app
from memory_api.errors import ERROR_CODES
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, keys_for

HUGE = "99999999999999999999"
BODIES = [
    b'\xff\xfe{"text": "a"}',  # not UTF-8
    b'{"a": \xc3\x28}',  # a broken two-byte sequence inside the JSON
    b'{"top_k": 1' + b"0" * 5000 + b"}",  # past the parser's digits
    ('{"limit": ' + HUGE + ', "top_k": -' + HUGE + ', "offset": ' + HUGE + "}").encode(),
    b"",
]


@pytest.fixture
def api(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    with LiveServer(create_app(svc)) as server:
        yield server, keys_for(engine)


def _routes(c: httpx.Client) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Every (method, path, parameters) of the served schema but the namespace's deletion."""
    spec = c.get("/openapi.json").json()
    out = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method in {"get", "post", "put", "patch", "delete"} and path != "/v1/namespace":
                out.append((method.upper(), path, op.get("parameters", [])))
    return out


def _fill(path: str, value: str) -> str:
    return re.sub(r"\{[^}]+\}", value, path)


def _refused_with_code(r: httpx.Response, what: str) -> None:
    assert r.status_code < 500, (what, r.status_code, r.text[:300])
    if r.status_code >= 400:
        body = r.json()
        assert body.get("code") in ERROR_CODES and body.get("detail"), (what, r.text[:300])


def test_edge_input_on_every_route_is_a_4xx_with_a_code(api) -> None:
    server, keys = api
    auth = {"Authorization": f"Bearer {keys['admin']}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=60) as c:
        routes = _routes(c)
        assert len(routes) >= 15
        sent = 0
        for method, path, params in routes:
            for ident in ("0", HUGE, "%FF"):
                url = _fill(path, ident)
                if method in {"POST", "PUT", "PATCH"}:
                    for body in BODIES:
                        r = c.request(
                            method, url, content=body, headers={"content-type": "application/json"}
                        )
                        _refused_with_code(r, f"{method} {url} {body[:40]!r}")
                        sent += 1
                names = [p["name"] for p in params if p.get("in") == "query"]
                for name in names:
                    for v in (HUGE, f"-{HUGE}", "1e400", "%FF"):
                        r = c.request(method, f"{url}?{name}={v}")
                        _refused_with_code(r, f"{method} {url}?{name}={v}")
                        sent += 1
    # bodies on every writing route and every query parameter, in each of three path values
    assert sent >= 3 * (10 * len(BODIES) + 20), sent


def test_fact_search_in_a_namespace_with_nothing_to_index(api) -> None:
    server, keys = api
    auth = {"Authorization": f"Bearer {keys['admin']}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=60) as c:
        for key, value in (("0", "0"), ("?", "!"), ("-", "...")):
            assert c.post("/v1/facts", json={"key": key, "value": value}).status_code == 201
        for text in ("0", "", " ", "?", "the", "a b c", "zebra", "!!!", "0 0 0"):
            r = c.post("/v1/facts/search", json={"text": text})
            _refused_with_code(r, f"facts/search {text!r}")
            if r.status_code == 200:
                assert isinstance(r.json(), list)
