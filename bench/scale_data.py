"""Cards and query states for bench/scale.py: preconditions of every shape the extractor and
operators write (==, in, ||, ranges, contains), tools skewed (a few tools take most cards and
most calls), free text on a share of the queries."""

from __future__ import annotations

import random
import uuid

TOOLS = 400
ERRORS = 250
SHAPES = ("eq", "eq2", "in", "or", "contains")  # and a tenth of the cards: ranges alone


def skewed(rnd: random.Random, n: int) -> int:
    """0..n-1, the low numbers far more often (a tenth of the draws hit the first 1%)."""
    return min(n - 1, int(n * rnd.random() ** 2))


def preconditions(i: int, rnd: random.Random) -> list[str]:
    """One card's preconditions, its shape chosen by i."""
    t, u, e = skewed(rnd, TOOLS), skewed(rnd, TOOLS), rnd.randrange(ERRORS)
    shape = SHAPES[i % len(SHAPES)] if i % 10 else "range"
    if shape == "eq":
        return [f'tool == "tool_{t}"', f'last_error_code == "e{e}"']
    if shape == "eq2":
        return [f'last_tool == "tool_{t}" && last_error == "error {e} on <id>"']
    if shape == "in":
        return [f'tool in ["tool_{t}", "tool_{u}"]', f"retry_count >= {e % 4}"]
    if shape == "or":
        return [f'tool == "tool_{t}" || last_tool == "tool_{u}"', f'task_type == "task_{e % 7}"']
    if shape == "range":
        low = 100 * (e % 45)  # a latency window: slow calls of one kind
        return [f"retry_count >= {e % 4}", f"latency_ms >= {low} && latency_ms < {low + 300}"]
    return [f'last_error.contains("error {e} ")', f'tool == "tool_{t}"']


def seed(engine, n: int, namespace: str = "bench") -> None:
    """n active cards in one namespace, bulk inserted."""
    from sqlalchemy import insert

    from memory_core.db import session_scope
    from memory_core.models.card import Card
    from memory_core.models.columns import utcnow

    rnd = random.Random(11)
    now = utcnow()
    for start in range(0, n, 20_000):
        rows = []
        for i in range(start, min(n, start + 20_000)):
            pre = preconditions(i, rnd)
            rows.append(
                {
                    "card_id": uuid.UUID(int=rnd.getrandbits(128)),
                    "namespace": namespace,
                    "kind": "experience",
                    "scenario": f"card {i}: {pre[0]}",
                    "preconditions": pre,
                    "action_sequence": [{"tool": f"tool_{i % TOOLS}", "params_template": {}}],
                    "failure_modes": [{"mode": f"error {i % ERRORS}", "handling": "back off"}],
                    "confidence": 0.5 + (i % 50) / 100,
                    "status": "active",
                    "signature": uuid.UUID(int=rnd.getrandbits(128)).hex,
                    "provenance": {},
                    "evidence_count": 1,
                    "created_at": now,
                    "updated_at": now,
                    "use_count": i % 17,
                    "version": 1,
                }
            )
        with session_scope(engine) as session:
            session.execute(insert(Card), rows)


def states(k: int, seed_: int = 7) -> list[dict]:
    """k pre-call states: skewed tools, errors, counters; a third carry a free-text query."""
    rnd = random.Random(seed_)
    out = []
    for _ in range(k):
        t, e = skewed(rnd, TOOLS), rnd.randrange(ERRORS)
        state = {
            "tool": f"tool_{t}",
            "last_tool": f"tool_{skewed(rnd, TOOLS)}",
            "last_error": f"error {e} on <id>",
            "last_error_code": f"e{e}",
            "retry_count": rnd.randrange(4),
            "latency_ms": rnd.randrange(5000),
            "task_type": f"task_{e % 7}",
        }
        query = f"tool_{t} error {e} back off" if rnd.random() < 0.33 else None
        out.append({"task_state": state, "query": query})
    return out
