"""A namespace to look at in the console: cards, a trajectory with evidence, a dead letter."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy.engine import Engine

from memory_core.db import session_scope
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardEvidence, CardVersion
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect.dead_letters import FACTS_DEAD_LETTER
from memory_core.serve.keys import create_key
from tests.helpers.serve import add_card


@dataclass
class Seeded:
    """What was stored: keys by role, card ids by name, the trajectory and the dead letter."""

    keys: dict[str, str] = field(default_factory=dict)
    cards: dict[str, Any] = field(default_factory=dict)
    trajectory: Any = None
    dead_letter: Any = None


def _steps(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "tool_calls": [{"function": {"name": "search", "arguments": "{}"}}]}
        for _ in range(n)
    ]


def seed(engine: Engine, namespace: str = "team-a") -> Seeded:
    """Cards of two namespaces, one in review, history, evidence on a trajectory, a dead letter."""
    s = Seeded()
    for role, scopes in (("read", ["read"]), ("write", ["read", "write"]), ("admin", ["admin"])):
        s.keys[role] = create_key(
            engine=engine, namespace=namespace, scopes=scopes, name=f"Ada {role}"
        )[1]
    s.keys["other"] = create_key(engine=engine, namespace="team-b", scopes=["admin"], name="Bob")[1]
    s.cards["held"] = add_card(
        engine,
        namespace=namespace,
        scenario="search answers 429 on big pages",
        preconditions=['tool == "search"', "retry_count < 3"],
        confidence=0.8,
    )
    s.cards["lookup"] = add_card(
        engine,
        namespace=namespace,
        scenario="lookup needs an order id",
        preconditions=['tool == "lookup"'],
        tool="lookup",
        confidence=0.4,
    )
    s.cards["review"] = add_card(
        engine,
        namespace=namespace,
        scenario="refunds need a second look",
        preconditions=['tool == "refund"'],
        tool="refund",
        status="review",
        confidence=0.5,
    )
    s.cards["review2"] = add_card(
        engine,
        namespace=namespace,
        scenario="cancel twice is refused",
        preconditions=['tool == "cancel"'],
        tool="cancel",
        status="review",
        confidence=0.5,
    )
    s.cards["foreign"] = add_card(engine, namespace="team-b", scenario="team b secret lesson")
    report = ingest(
        engine=engine,
        records=[
            (
                "t0",
                {
                    "id": "traj-1",
                    "messages": [{"role": "user", "content": f"step text {i}"} for i in range(12)],
                },
            ),
            ("t1", {"id": "traj-dead", "messages": [{"role": "user", "content": "hi"}]}),
        ],
        namespace=namespace,
        task_type="support",
        max_observation_chars=2000,
    )
    assert report.stored == 2, report
    with session_scope(engine) as session:
        rows = {t.key: t for t in session.query(Trajectory).all()}
        traj, dead = rows["traj-1"], rows["traj-dead"]
        dead.status, dead.error, dead.attempts = "dead_letter", "LLM answer invalid: no JSON", 3
        # its facts part is parked too (the console names both)
        dead.extra = {**(dead.extra or {}), FACTS_DEAD_LETTER: {"error": "LLMTransient: 503"}}
        session.add(dead)
        held = session.get(Card, s.cards["held"].card_id)
        held.evidence_count = 1
        session.add(
            CardEvidence(
                card_id=held.card_id,
                trajectory_id=traj.id,
                step=6,
                condition={"tool": "search"},
                action={"tool": "search"},
                result={"error": "429"},
            )
        )
        session.add(
            CardVersion(
                card_id=held.card_id,
                version=1,
                snapshot={"scenario": held.scenario, "confidence": 0.6},
                reason="distilled",
                actor="retrospect",
            )
        )
        session.add(
            CardVersion(
                card_id=held.card_id,
                version=2,
                snapshot={"scenario": held.scenario, "confidence": 0.8},
                reason="feedback: success",
                actor="key:x",
            )
        )
        held.version = 2
        session.add(held)
        s.trajectory, s.dead_letter = traj.id, dead.id
    return s


@contextmanager
def signed_in(base: str, key: str) -> Iterator[httpx.Client]:
    """An HTTP client with a console session for this key."""
    with httpx.Client(base_url=base, timeout=30) as c:
        token = csrf_of(c.get("/ui/login").text)
        r = c.post("/ui/login", data={"key": key, "next": "/ui/cards", "csrf": token})
        assert r.status_code == 303, r.text
        yield c


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF token on the page"
    return m.group(1)
