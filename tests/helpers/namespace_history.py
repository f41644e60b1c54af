"""A namespace with a history: cards and facts (one with a validity end, one superseding
another), their versions and evidence, and two runs (one a dead letter)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from memory_core.db import session_scope
from memory_core.models import Card, CardEvidence, CardVersion, Trajectory
from tests.helpers.serve import add_card


def history(engine: Engine, namespace: str, *, cards: int = 3) -> list[Card]:
    """Store the history; the cards and facts written."""
    runs = []
    with session_scope(engine) as s:
        for i in range(2):
            run = Trajectory(
                namespace=namespace,
                key=f"run-{i}",
                content_hash=hashlib.sha256(f"{namespace}{i}".encode()).hexdigest(),
                source_format="steps",
                task_type="book",
                outcome="failure" if i == 0 else "success",
                steps=[{"index": 0, "type": "tool_call", "tool": "pay", "error": "http 429"}],
                extra={"agent": "a", "n": i},
                status="dead_letter" if i == 0 else "done",
                error="timed out" if i == 0 else None,
            )
            s.add(run)
            runs.append(run.id)
    made = [add_card(engine, namespace=namespace, scenario=f"lesson {i}") for i in range(cards)]
    old = add_card(engine, namespace=namespace, scenario="home city", kind="fact")
    new = add_card(engine, namespace=namespace, scenario="home city now", kind="fact")
    until = datetime(2031, 5, 4, 3, 2, 1, 123456, tzinfo=UTC)
    with session_scope(engine) as s:
        o, n = s.get(Card, old.card_id), s.get(Card, new.card_id)
        assert o is not None and n is not None
        o.status, o.superseded_by, o.key, o.value = "superseded", n.card_id, "kim.city", "Oslo"
        n.supersedes, n.key, n.value, n.valid_until = o.card_id, "kim.city", "Bergen", until
        n.provenance = {"producer": "test", "nested": {"b": 1, "a": [1.5, "x"]}}
        n.version = o.version = 2
        for c in [*(s.get(Card, m.card_id) for m in made), o, n]:
            assert c is not None
            for v in range(1, c.version + 1):
                s.add(
                    CardVersion(
                        card_id=c.card_id,
                        version=v,
                        snapshot={"scenario": c.scenario, "v": v, "z": {"y": 1, "x": 2}},
                        reason="stored" if v == 1 else "superseded",
                        actor="test",
                        created_at=c.created_at + timedelta(seconds=v),
                    )
                )
            for j, run in enumerate(runs):
                s.add(
                    CardEvidence(
                        card_id=c.card_id,
                        trajectory_id=run,
                        step=j,
                        condition={"last_tool": "pay"},
                        action={"tool": "wait"},
                        result={"error": "http 429", "ok": j == 1},
                    )
                )
            c.evidence_count = len(runs)
    return [*made, old, new]
