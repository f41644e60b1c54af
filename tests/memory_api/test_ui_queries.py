"""The query log page on a real server: agents query over the API and report outcomes, and the
console shows each query's state (redacted), served and withheld cards with scores, latency,
key name and outcome; filters by card, key and time; a card page links to its queries."""

from __future__ import annotations

import html
from datetime import timedelta

import httpx
import pytest

from memory_api.app import create_app
from memory_core.models.columns import utcnow
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from memory_core.settings_groups import HoldoutSettings
from tests.helpers.serve import LiveServer
from tests.helpers.ui import seed, signed_in

SECRET = "sk-live-abcdefghijklmnopqrstuvwx0123"


@pytest.fixture
def ui(settings, engine):
    # half the matching cards withheld, so the log shows both arms
    svc = MemoryService(
        engine=engine, settings=settings.model_copy(update={"holdout": HoldoutSettings(rate=0.5)})
    )
    seeded = seed(engine)
    planner = create_key(engine=engine, namespace="team-a", scopes=["read"], name="planner bot")
    with LiveServer(create_app(svc)) as server:
        yield server, seeded, planner, svc


def _ask(server, key: str, state: dict, run: str) -> dict:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post(
            "/v1/cards/query",
            json={"task_state": state, "run_id": run},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert r.status_code == 200, r.text
        return r.json()


def test_served_queries_show_state_cards_scores_latency_key_and_outcome(ui) -> None:
    server, s, (planner, secret), svc = ui
    held, lookup = s.cards["held"].card_id, s.cards["lookup"].card_id
    answers = [
        _ask(server, secret, {"tool": "search", "retry_count": 1, "auth": SECRET}, f"run-{i}")
        for i in range(12)
    ]
    other = _ask(server, s.keys["read"], {"tool": "lookup"}, "run-lookup")
    reported = answers[0]["query_id"]
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post(
            f"/v1/uses/{reported}/outcome",
            json={"outcome": "failure"},
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert r.status_code == 200, r.text
    svc.uses.flush()  # the writer's next tick, now
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get("/ui/queries")
        assert page.status_code == 200
        text = html.unescape(page.text)
        # every query, the agent key by name (never its secret), the state redacted
        assert text.count("<tr>\n    <td>") == 13
        assert "planner bot" in text and "Ada read" in text and secret not in text
        assert SECRET not in text and "[REDACTED:" in text and '"retry_count": 1' in text
        assert "search answers 429 on big pages" in text and " ms</td>" in text
        assert ">failure</span>" in text and text.count("not reported") == 12
        # the holdout: some runs had the card withheld (its score shown in the other column)
        served = sum(1 for a in answers if a["cards"])
        assert 0 < served < 12, served

        # filter by key: the planner's 12; by card: only the lookup query
        text = c.get(f"/ui/queries?key={planner.id}").text
        assert "run-lookup" not in text and text.count("planner bot") >= 12
        assert "Ada read</td>" not in text
        text = c.get(f"/ui/queries?card={str(lookup)[:8]}").text
        assert "lookup needs an order id" in text and "search answers 429" not in text
        assert other["query_id"][:8] in text
        # filter by time: none before the queries, all after them
        later = (utcnow() + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
        assert "No served query matches" in c.get(f"/ui/queries?since={later}").text
        r = c.get("/ui/queries?since=yesterday")
        assert r.status_code == 400 and "since must be an ISO date" in r.text
        assert c.get("/ui/queries?card=zz").status_code == 400
        assert c.get("/ui/queries?key=not-a-key").status_code == 400

        # the card page links to its queries in the log
        card = c.get(f"/ui/cards/{held}").text
        assert f'href="/ui/queries?card={held}"' in card
        assert 'href="/ui/queries"' in card  # in the navigation

    # another namespace sees none of these
    with signed_in(server.url, s.keys["other"]) as c:
        text = c.get("/ui/queries").text
        assert "No served query matches" in text and "planner bot" not in text
        assert c.get(f"/ui/queries?card={held}").status_code == 404


def test_query_log_pages_newest_first(ui, engine) -> None:
    server, s, (_, secret), svc = ui
    ids = [
        _ask(server, secret, {"tool": "search", "retry_count": 1, "n": i}, f"r{i}")["query_id"]
        for i in range(55)
    ]
    svc.uses.flush()
    with signed_in(server.url, s.keys["read"]) as c:
        first = c.get("/ui/queries").text
        assert ids[-1][:8] in first and ids[4][:8] not in first
        nxt = html.unescape(first.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0])
        second = c.get(nxt).text
        assert all(q[:8] in second for q in ids[:5]) and ids[-1][:8] not in second
        assert 'rel="next"' not in second and "Newest" in second
