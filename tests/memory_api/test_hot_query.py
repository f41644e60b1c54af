"""The hot route's framework-free path (memory_api/hot_query.py) on a real uvicorn server: a
warm plain query is answered by it with the route's own answer, counted under the route in
the metrics; an explained or prompted query runs in a worker thread with the route's answer;
and every request it must not take (no key, a bad key, a bad body, a body the limit refuses)
is answered by the route exactly as before."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import pytest

from memory_api.app import create_app
from memory_api.hot_query import HotQuery
from memory_core.serve.schemas import QueryRequest
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card, keys_for

STATE = {"tool": "search", "retry_count": 1}


def _hot(app) -> HotQuery:
    """The wrapper in the built middleware stack."""
    layer = app.middleware_stack
    while layer is not None and not isinstance(layer, HotQuery):
        layer = getattr(layer, "app", None)
    assert isinstance(layer, HotQuery)
    return layer


@pytest.fixture
def served(settings, engine):
    for i in range(3):
        add_card(engine, scenario=f"card {i}", preconditions=['tool == "search"'])
    svc = MemoryService(engine=engine, settings=settings)
    app = create_app(svc)
    with LiveServer(app) as server:
        yield server, app, keys_for(engine), svc


def _warm(c: httpx.Client, svc: MemoryService, who_key: str) -> None:
    """Queries down the route until the namespace is warm (memory_core/serve/inline.py)."""
    principal = svc.authenticate(who_key)
    for _ in range(4 * svc.inline.streak):
        assert c.post("/v1/cards/query", json={"task_state": STATE}).status_code == 200
        if svc.inline.warm(principal.namespace) is not None:
            return
    pytest.fail("the namespace never warmed up")


def _hot_post(
    c: httpx.Client, layer: HotQuery, reset: Callable[[], None] = lambda: None, **kw
) -> httpx.Response:
    """A warm plain query the hot path answers. On a busy machine the feed's thread can be late
    past the refresh interval (or a collection lands in a query): the query then goes down the
    route, as it should, and the next one is warm again; a few tries, not one."""
    for _ in range(20):
        reset()
        before = layer.answered
        r = c.post("/v1/cards/query", **kw)
        if layer.answered == before + 1:
            return r
        time.sleep(0.05)
    pytest.fail("the hot path answered none of 20 warm queries")


def test_a_warm_plain_query_is_answered_by_the_hot_path_as_the_route_would(served) -> None:
    server, app, keys, svc = served
    auth = {"Authorization": f"Bearer {keys['read']}"}
    with httpx.Client(base_url=server.url, headers=auth) as c:
        cold = c.post("/v1/cards/query", json={"task_state": STATE})
        hot_layer = _hot(app)
        assert hot_layer.answered == 0  # the first query loads the snapshot: the route's
        _warm(c, svc, keys["read"])
        before = hot_layer.answered
        r = _hot_post(c, hot_layer, json={"task_state": STATE})
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert int(r.headers["content-length"]) == len(r.content)
        body, route_body = r.json(), cold.json()
        assert set(body) == set(route_body)
        ids = [h["card"]["card_id"] for h in body["cards"]]
        assert sorted(ids) == sorted(h["card"]["card_id"] for h in route_body["cards"])
        assert body["query_id"] and all(h["use_id"] for h in body["cards"])  # uses recorded
        svc.uses.flush()
        hit = body["cards"][0]
        fb = c.post(
            f"/v1/cards/{hit['card']['card_id']}/feedback",
            json={"outcome": "success", "use_id": hit["use_id"]},
            headers={"Authorization": f"Bearer {keys['write']}"},
        )
        assert fb.status_code == 200, fb.text  # the use id it gave is a real, written use
        metrics = c.get("/metrics").text
    line = 'hindsight_http_requests_total{method="POST",route="/v1/cards/query",status="200"}'
    counted = [ln for ln in metrics.splitlines() if ln.startswith(line)]
    assert counted and float(counted[0].split()[-1]) >= before + 2


def test_requests_the_hot_path_must_not_take_get_the_routes_answers(served) -> None:
    server, app, keys, svc = served
    auth = {"Authorization": f"Bearer {keys['read']}"}
    with httpx.Client(base_url=server.url, headers=auth) as c:
        _warm(c, svc, keys["read"])
        hot_layer = _hot(app)
        before = hot_layer.answered
        cases = {
            "no key": c.post(
                "/v1/cards/query", json={"task_state": STATE}, headers={"Authorization": ""}
            ),
            "unknown key": c.post(
                "/v1/cards/query",
                json={"task_state": STATE},
                headers={"Authorization": "Bearer hs_nope"},
            ),
            "not json": c.post(
                "/v1/cards/query",
                content=b"{not json",
                headers={"content-type": "application/json"},
            ),
            "wrong shape": c.post("/v1/cards/query", json={"task_state": "search"}),
            "unknown field": c.post("/v1/cards/query", json={"task_state": STATE, "top_k": -1}),
            "too deep": c.post(
                "/v1/cards/query",
                content=b'{"task_state": {"a": ' + b"[" * 600 + b"]" * 600 + b"}}",
                headers={"content-type": "application/json"},
            ),
        }
        explained = c.post("/v1/cards/query", json={"task_state": STATE, "explain": True})
        prompted = c.post("/v1/cards/query", json={"task_state": STATE, "prompt_tokens": 100})
    assert hot_layer.answered == before  # none of them went the hot way
    assert cases["no key"].status_code == 401 and cases["unknown key"].status_code == 401
    assert cases["not json"].status_code == 422
    assert cases["wrong shape"].status_code == 422
    assert cases["unknown field"].status_code == 422
    assert cases["too deep"].status_code == 400
    for what, r in cases.items():
        assert "code" in r.json(), (what, r.text)
    assert explained.status_code == 200 and explained.json()["explain"] is not None
    assert prompted.status_code == 200 and prompted.json()["prompt"]
    assert json.loads(explained.content)["cards"]


MOVING = {"score", "use_count", "last_used_at"}  # the clock and the warm-up's uses move them


def _without_moving(value):
    """The answer without what moves between two asks of the same query."""
    if isinstance(value, dict):
        return {k: _without_moving(v) for k, v in value.items() if k not in MOVING}
    if isinstance(value, list):
        return [_without_moving(v) for v in value]
    return value


def test_explained_and_prompted_queries_run_in_a_thread_with_the_routes_answer(served) -> None:
    server, app, keys, svc = served
    auth = {"Authorization": f"Bearer {keys['read']}"}
    bodies = [
        {"task_state": STATE, "explain": True, "record_use": False},
        {"task_state": {"tool": "other"}, "explain": True, "record_use": False},
        {"task_state": STATE, "prompt_tokens": 100, "record_use": False},
    ]
    with httpx.Client(base_url=server.url, headers=auth) as c:
        _warm(c, svc, keys["read"])
        layer = _hot(app)
        before, on_loop = layer.threaded, layer.answered
        answers = [c.post("/v1/cards/query", json=b) for b in bodies]
        recorded = c.post("/v1/cards/query", json={"task_state": STATE, "explain": True})
    assert layer.threaded == before + 4 and layer.answered == on_loop
    principal = svc.authenticate(keys["read"])
    for body, r in zip(bodies, answers, strict=True):
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        expected = svc.query(principal=principal, request=QueryRequest.model_validate(body))
        got, want = _without_moving(r.json()), _without_moving(expected.model_dump(mode="json"))
        assert got == want
    assert answers[0].json()["explain"]["candidates"] == 3 and answers[0].json()["cards"]
    assert not answers[1].json()["cards"] and answers[1].json()["explain"]["near_misses"]
    assert answers[2].json()["prompt"]
    assert recorded.json()["query_id"] and all(h["use_id"] for h in recorded.json()["cards"])


def test_the_hot_path_is_the_outermost_layer_and_keeps_the_outer_layers_rules(served) -> None:
    server, app, keys, svc = served
    auth = {"Authorization": f"Bearer {keys['read']}"}
    limit = svc.settings.serve.max_body_bytes
    with httpx.Client(base_url=server.url, headers=auth) as c:
        _warm(c, svc, keys["read"])
        assert isinstance(app.middleware_stack, HotQuery)  # in front of errors and metrics
        hot_layer = _hot(app)
        before = hot_layer.answered
        padded = json.dumps({"task_state": {**STATE, "pad": "x" * limit}}).encode()
        too_big = c.post("/v1/cards/query", content=padded)
        guarded = c.post("/v1/cards/query", params={"q": "a\x00b"}, json={"task_state": STATE})
        with_query = c.post("/v1/cards/query", params={"q": "ok"}, json={"task_state": STATE})
        assert hot_layer.answered == before  # the body limit's, the guard's, the route's
        hot = _hot_post(c, hot_layer, json={"task_state": STATE})
        assert hot.status_code == 200
    assert too_big.status_code == 413 and too_big.json()["code"]
    assert guarded.status_code == 400 and guarded.json()["field"] == "q"
    assert with_query.status_code == 200


def test_a_clean_body_skips_the_input_walk_and_an_escaped_one_still_takes_it(
    served, monkeypatch
) -> None:
    import memory_core.serve.schemas as schemas

    server, app, keys, svc = served
    walked: list[object] = []
    real = schemas.check_json

    def counting(value, **kw):
        walked.append(value)
        return real(value, **kw)

    auth = {"Authorization": f"Bearer {keys['read']}"}
    with httpx.Client(base_url=server.url, headers=auth) as c:
        _warm(c, svc, keys["read"])
        monkeypatch.setattr(schemas, "check_json", counting)
        hot_layer = _hot(app)
        clean = _hot_post(c, hot_layer, walked.clear, json={"task_state": STATE})
        assert len(walked) == 0
        escaped = _hot_post(
            c, hot_layer, walked.clear, json={"task_state": {**STATE, "note": "café\n"}}
        )
        assert len(walked) == 1
        before = hot_layer.answered
        nul = c.post("/v1/cards/query", json={"task_state": {**STATE, "note": "a\x00b"}})
        assert hot_layer.answered == before  # refused: the route answers it
    assert clean.status_code == escaped.status_code == 200
    assert nul.status_code == 422 and "NUL" in nul.text


def test_a_crash_on_the_hot_path_is_a_500_counted_as_before(served, monkeypatch) -> None:
    server, _app, keys, svc = served
    auth = {"Authorization": f"Bearer {keys['read']}"}
    with httpx.Client(base_url=server.url, headers=auth) as c:
        _warm(c, svc, keys["read"])

        def broken(**_kw):
            raise RuntimeError("boom")

        monkeypatch.setattr(svc, "query_json_now", broken)
        r = c.post("/v1/cards/query", json={"task_state": STATE})
        monkeypatch.undo()
        metrics = c.get("/metrics").text
    assert r.status_code == 500
    line = 'hindsight_http_requests_total{method="POST",route="unmatched",status="500"}'
    assert any(ln.startswith(line) for ln in metrics.splitlines())
