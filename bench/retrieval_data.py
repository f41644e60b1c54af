"""Seeded cards and query states shared by the retrieval benchmarks (in process, over HTTP)."""

from __future__ import annotations

import random
import uuid

TOOLS = 400
ERRORS = 250


def error_text(e: int) -> str:
    """Error e as ingest would store it: a number in an error is masked as <n> (so the lesson
    is told apart by letters), and a query's raw text is normalised the same way."""
    return "error " + "".join(chr(ord("a") + int(d)) for d in str(e)) + " on <id>"


def _pre(i: int) -> list[str]:
    t, e = i % TOOLS, (i // TOOLS) % ERRORS
    shape = i % 3
    if shape == 0:
        return [f'tool == "tool_{t}"', f'last_error_code == "e{e}"']
    if shape == 1:
        return [f'last_tool == "tool_{t}" && last_error == "{error_text(e)}"']
    return [f'tool == "tool_{t}"', f"retry_count >= {e % 4}", f'task_type == "task_{e % 7}"']


def seed(engine, n: int, namespace: str = "bench") -> None:
    from sqlalchemy import insert

    from memory_core.db import session_scope
    from memory_core.models.card import Card
    from memory_core.models.columns import utcnow

    now = utcnow()
    chunk = 20_000
    for start in range(0, n, chunk):
        rows = [
            {
                "card_id": uuid.uuid4(),
                "namespace": namespace,
                "kind": "experience",
                "scenario": f"call tool_{i % TOOLS} after error {i % ERRORS}",
                "preconditions": _pre(i),
                "action_sequence": [
                    {"tool": f"tool_{i % TOOLS}", "params_template": {}, "note": ""}
                ],
                "expected_outcome": "",
                "actual_outcome": "",
                "failure_modes": [{"mode": f"error {i % ERRORS}", "handling": "back off"}],
                "confidence": 0.5 + (i % 50) / 100,
                "status": "active",
                "signature": uuid.uuid4().hex,
                "provenance": {},
                "evidence_count": 1,
                "created_at": now,
                "updated_at": now,
                "use_count": i % 17,
                "success_count": 0,
                "failure_count": 0,
                "consecutive_failures": 0,
                "version": 1,
                "decay_tier": 0,
            }
            for i in range(start, min(n, start + chunk))
        ]
        with session_scope(engine) as session:
            session.execute(insert(Card), rows)


def query_states(k: int, n: int = 5000) -> list[dict]:
    # states taken from the seeded lessons (so most queries match some cards), with noise
    rnd = random.Random(7)
    out = []
    for _ in range(k):
        i = rnd.randrange(n)
        t, e = i % TOOLS, (i // TOOLS) % ERRORS
        out.append(
            {
                "tool": f"tool_{t}",
                "last_tool": f"tool_{t if rnd.random() < 0.5 else rnd.randrange(TOOLS)}",
                "last_error": error_text(e),
                "last_error_code": f"e{e if rnd.random() < 0.7 else rnd.randrange(ERRORS)}",
                "retry_count": rnd.randrange(4),
                "task_type": f"task_{e % 7}",
                "tools_used": ["search", "book"],
            }
        )
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]
