"""Review ordered by provenance: the riskiest cards (quarantined, then the least trusted
origins) come first, then the oldest; the CLI shows the origin, the API keeps the order."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update
from sqlmodel import col

from memory_api.app import create_app
from memory_core.db import session_scope
from memory_core.models.card import Card
from memory_core.models.columns import utcnow
from memory_core.serve.service import MemoryService
from memory_core.validate.review import review_queue
from tests.helpers.cli import hindsight
from tests.helpers.serve import LiveServer, add_card, keys_for
from tests.helpers.ui import signed_in

# (scenario, origin, status), oldest first: the agent's own card waited longest
CARDS = [
    ("agent lesson", "agent_action", "review"),
    ("legacy lesson", None, "review"),  # no typed origin: ranks with the agent's actions
    ("operator write", "operator", "review"),
    ("tool text", "observed", "review"),
    ("llm guess", "llm", "review"),
    ("user claim", "user", "review"),
    ("held back", "agent_action", "quarantined"),
    ("served", "llm", "active"),
]
RISKIEST_FIRST = [
    "llm guess",
    "user claim",
    "tool text",
    "operator write",
    "agent lesson",
    "legacy lesson",
]


def _seed(engine, namespace: str = "team-a") -> None:
    start = utcnow() - timedelta(hours=len(CARDS))
    for i, (scenario, origin, status) in enumerate(CARDS):
        card = add_card(
            engine,
            namespace=namespace,
            scenario=scenario,
            preconditions=[f'tool == "t{i}"'],
            status=status,
            origin=origin,
        )
        with session_scope(engine) as s:
            s.execute(
                update(Card)
                .where(col(Card.card_id) == card.card_id)
                .values(created_at=start + timedelta(hours=i))
            )


def test_review_queue_riskiest_origin_first(engine) -> None:
    _seed(engine)
    got = [c.scenario for c in review_queue(engine=engine, namespace="team-a")]
    assert got == RISKIEST_FIRST
    with_q = [c.scenario for c in review_queue(engine=engine, namespace="team-a", quarantined=True)]
    assert with_q == ["held back", *RISKIEST_FIRST]
    assert [c.scenario for c in review_queue(engine=engine, namespace="team-a", limit=2)] == [
        "llm guess",
        "user claim",
    ]


def test_review_list_cli_shows_the_origin_in_risk_order(engine, env_for) -> None:
    _seed(engine, namespace="default")
    listed = json.loads(hindsight(env_for, "review", "list", "-f", "json").stdout)
    assert [c["scenario"] for c in listed] == RISKIEST_FIRST
    out = hindsight(env_for, "review", "list", "--quarantined").stdout
    assert "origin" in out and "riskiest first" in out
    rows = [line for line in out.splitlines() if any(s in line for s, _, _ in CARDS)]
    order = [next(s for s, _, _ in CARDS if s in line) for line in rows]
    assert order == ["held back", *RISKIEST_FIRST]
    assert "quarantined" in rows[0] and "llm" in rows[1] and "user" in rows[2]


@pytest.fixture
def api(settings, engine):
    with LiveServer(create_app(MemoryService(engine=engine, settings=settings))) as server:
        yield server


def test_review_api_keeps_the_risk_order(api, engine) -> None:
    _seed(engine)
    keys = keys_for(engine)
    auth = {"Authorization": f"Bearer {keys['admin']}"}
    with httpx.Client(base_url=api.url, headers=auth, timeout=30) as c:
        queue = c.get("/v1/review").json()
    assert [q["scenario"] for q in queue] == RISKIEST_FIRST
    assert queue[0]["provenance"]["origin"] == "llm"


def test_review_page_shows_the_origin_in_risk_order(api, engine) -> None:
    _seed(engine)
    keys = keys_for(engine)
    with signed_in(api.url, keys["admin"]) as c:
        page = c.get("/ui/review").text
    at = [page.index(f">{s}<") for s in RISKIEST_FIRST]
    assert at == sorted(at)
    assert "origin llm" in page and "origin agent_action" in page
