"""Cards and query states for bench/scale.py: preconditions of every shape the extractor and
operators write (==, in, ||, ranges, contains), tools skewed (a few tools take most cards and
most calls), free text on a share of the queries."""

from __future__ import annotations

import random
import uuid

TOOLS = 400
ERRORS = 250


def error_text(e: int) -> str:
    """Error e as ingest would store it: a number in an error is masked as <n> (so the lesson
    is told apart by letters), and a query's raw text is normalised the same way."""
    return f"error {error_word(e)} on <id>"


def error_word(e: int) -> str:
    """The letters that tell error e apart (0 -> a, 12 -> bc)."""
    return "".join(chr(ord("a") + int(d)) for d in str(e))


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
        return [f'last_tool == "tool_{t}" && last_error == "{error_text(e)}"']
    if shape == "in":
        return [f'tool in ["tool_{t}", "tool_{u}"]', f"retry_count >= {e % 4}"]
    if shape == "or":
        return [f'tool == "tool_{t}" || last_tool == "tool_{u}"', f'task_type == "task_{e % 7}"']
    if shape == "range":
        low = 100 * (e % 45)  # a latency window: slow calls of one kind
        return [f"retry_count >= {e % 4}", f"latency_ms >= {low} && latency_ms < {low + 300}"]
    return [f'last_error.contains("error {error_word(e)} ")', f'tool == "tool_{t}"']


def _rows(n: int, namespace: str):
    """The cards as column values, chunk by chunk."""
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
        yield rows


def seed(engine, n: int, namespace: str = "bench") -> None:
    """n active cards in one namespace, bulk inserted: on SQLite one executemany of the stored
    forms per chunk (a million cards in about a minute, not an ORM insert's ten), elsewhere
    the table's Core insert."""
    from sqlalchemy import insert

    from memory_core.db import session_scope
    from memory_core.models.card import Card

    table = Card.__table__  # type: ignore[attr-defined]
    if engine.dialect.name != "sqlite":
        for rows in _rows(n, namespace):
            full = [{**_defaults(table), **r} for r in rows]
            with session_scope(engine) as session:
                session.execute(insert(table), full)
        return
    names = [c.name for c in table.columns]
    quoted = ", ".join(f'"{c}"' for c in names)
    sql = f"INSERT INTO card ({quoted}) VALUES ({', '.join('?' * len(names))})"
    import sqlite3

    conn = sqlite3.connect(engine.url.database)  # plain: no pool, no per-statement events
    try:
        cur = conn.cursor()
        cur.execute("PRAGMA synchronous = OFF")
        # the card's triggers and secondary indexes off while inserting, then built once and
        # the change feed written in one statement, as the triggers would have: random ids
        # and signatures put each insert anywhere in the indexes
        later = cur.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'card'"
            " AND type IN ('index', 'trigger') AND sql IS NOT NULL"
        ).fetchall()
        for kind, name, _ in later:
            cur.execute(f'DROP {kind.upper()} "{name}"')
        for rows in _rows(n, namespace):
            base = _defaults(table)
            full = ({**base, **r} for r in rows)
            cur.executemany(sql, [[_stored(f[c]) for c in names] for f in full])
        cur.execute(
            "INSERT INTO card_change (namespace, card_id) SELECT namespace, card_id FROM card"
            " WHERE namespace = ? ORDER BY rowid",
            (namespace,),
        )
        for _, _, ddl in later:
            cur.execute(ddl)
        conn.commit()
    finally:
        conn.close()


def _defaults(table) -> dict:
    """Every column's value when the seed gives none (server and Python defaults)."""
    out = {}
    for c in table.columns:
        d = c.default.arg if c.default is not None and not callable(c.default.arg) else None
        if d is None and c.server_default is not None:
            d = {"false": False, "0": 0}.get(str(c.server_default.arg))
        text = not c.nullable and c.type.python_type is str
        out[c.name] = d if d is not None else ("" if text else None)
    return out


def _stored(v):
    """A value as SQLAlchemy stores it on SQLite."""
    import datetime
    import json

    if isinstance(v, uuid.UUID):
        return v.hex
    if isinstance(v, datetime.datetime):
        return v.astimezone(datetime.UTC).replace(tzinfo=None).isoformat(" ")
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return v


def states(k: int, seed_: int = 7) -> list[dict]:
    """k pre-call states: skewed tools, errors, counters; a third carry a free-text query."""
    rnd = random.Random(seed_)
    out = []
    for _ in range(k):
        t, e = skewed(rnd, TOOLS), rnd.randrange(ERRORS)
        state = {
            "tool": f"tool_{t}",
            "last_tool": f"tool_{skewed(rnd, TOOLS)}",
            "last_error": error_text(e),
            "last_error_code": f"e{e}",
            "retry_count": rnd.randrange(4),
            "latency_ms": rnd.randrange(5000),
            "task_type": f"task_{e % 7}",
        }
        query = f"tool_{t} error {error_word(e)} back off" if rnd.random() < 0.33 else None
        out.append({"task_state": state, "query": query})
    return out


def floor_and_brute(snap, mix: list[dict], brute_states: int) -> dict[str, list]:
    """On the same states: the index lookup alone (the floor) and every card checked (brute
    force, on the first `brute_states`), each timed by the wall clock and the thread's CPU."""
    import time

    from memory_core.preconditions import make_context, normalise_value
    from memory_core.serve.retrieval import holds

    out: dict[str, list] = {k: [] for k in ("floor", "floor_cpu", "brute", "brute_cpu", "cands")}
    for q in mix:
        norm = {k: normalise_value(v) for k, v in q["task_state"].items()}
        t, c = time.perf_counter(), time.thread_time()
        found = snap.candidates(norm)
        out["floor_cpu"].append((time.thread_time() - c) * 1000)
        out["floor"].append((time.perf_counter() - t) * 1000)
        out["cands"].append(len(found))
    entries = list(snap.entries.values())
    for q in mix[:brute_states]:
        norm = {k: normalise_value(v) for k, v in q["task_state"].items()}
        t, c = time.perf_counter(), time.thread_time()
        ctx, keys = make_context(norm), frozenset(norm)
        hits = [e for e in entries if holds(e.compiled, ctx, keys)]
        hits.sort(key=lambda e: -e.confidence)
        out["brute_cpu"].append((time.thread_time() - c) * 1000)
        out["brute"].append((time.perf_counter() - t) * 1000)
    return out
