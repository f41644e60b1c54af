"""Retrieval latency in process at 5,000 / 100,000 / 1,000,000 active cards, and over HTTP
(uvicorn on loopback, an async httpx client as the load generator) at 5,000 cards.

Cards are seeded by bulk insert with preconditions shaped like the rule extractor's:
`tool == "x"`, `last_tool == "x" && last_error == "..."`, `tool == "x" && retry_count >= n`.
Queries are pre-call states over the same tools and errors, so most match a few cards.
In process = MemoryService.query (atom index, evaluation, ranking, reading the top k rows,
queuing the uses), snapshot already loaded. SQLite (the embedded default) throughout.

    python bench/retrieval.py [--sizes 5000 100000 1000000] [--queries 2000] [--http-seconds 10]

Writes bench/results/retrieval.json and retrieval.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
TOOLS = 400
ERRORS = 250


def _pre(i: int) -> list[str]:
    t, e = i % TOOLS, (i // TOOLS) % ERRORS
    shape = i % 3
    if shape == 0:
        return [f'tool == "tool_{t}"', f'last_error_code == "e{e}"']
    if shape == 1:
        return [f'last_tool == "tool_{t}" && last_error == "error {e} on <id>"']
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


def _states(k: int, n: int = 5000) -> list[dict]:
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
                "last_error": f"error {e} on <id>",
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


def in_process(n: int, queries: int) -> dict:
    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="hs-bench-"))
    settings = Settings(data_dir=tmp)
    db.upgrade(settings)
    engine = db.make_engine(settings)
    t0 = time.perf_counter()
    seed(engine, n)
    seed_s = time.perf_counter() - t0
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(create_key(engine=engine, namespace="bench", scopes=["read"])[1])
    t0 = time.perf_counter()
    svc.snapshots.get("bench")
    load_s = time.perf_counter() - t0
    svc.start()
    lat, matched, cands = [], [], []
    for state in _states(queries, n):
        t = time.perf_counter()
        res = svc.query(principal=who, request=QueryRequest(task_state=state))
        lat.append((time.perf_counter() - t) * 1000)
        matched.append(len(res.cards))
    snap = svc.snapshots.get("bench")
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve

    for state in _states(200, n):
        cands.append(retrieve(snapshot=snap, state=state, now=utcnow()).candidates)
    svc.close()
    out = {
        "cards": n,
        "backend": "sqlite",
        "seed_s": round(seed_s, 1),
        "snapshot_load_s": round(load_s, 2),
        "p50_ms": round(statistics.median(lat), 3),
        "p99_ms": round(pct(lat, 99), 3),
        "max_ms": round(max(lat), 3),
        "mean_cards_returned": round(statistics.mean(matched), 2),
        "mean_candidates_evaluated": round(statistics.mean(cands), 1),
        "uses_written": svc.uses.written,
    }
    print(json.dumps(out), flush=True)
    engine.dispose()
    return out


def over_http(n: int, seconds: float, concurrency: int) -> dict:
    import subprocess

    import httpx

    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="hs-bench-http-"))
    settings = Settings(data_dir=tmp)
    db.upgrade(settings)
    engine = db.make_engine(settings)
    seed(engine, n)
    key = create_key(engine=engine, namespace="bench", scopes=["read"])[1]
    port = 18900 + random.randrange(90)
    exe = Path(sys.executable).parent / "hindsight"
    env = {"HINDSIGHT_DATA_DIR": str(tmp), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([str(exe), "serve", "--port", str(port)], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        states = _states(5000, n)

        async def load() -> tuple[list[float], int, float]:
            lat: list[float] = []
            errors = 0
            limits = httpx.Limits(max_connections=concurrency)
            headers = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits) as c:
                for s in states[:200]:  # warm-up: snapshot loaded, keys cached
                    await c.post("/v1/cards/query", json={"task_state": s})
                stop = time.perf_counter() + seconds

                async def worker(w: int) -> None:
                    nonlocal errors
                    i = w
                    while time.perf_counter() < stop:
                        t = time.perf_counter()
                        r = await c.post("/v1/cards/query", json={"task_state": states[i % 5000]})
                        lat.append((time.perf_counter() - t) * 1000)
                        errors += r.status_code != 200
                        i += concurrency

                t0 = time.perf_counter()
                await asyncio.gather(*(worker(w) for w in range(concurrency)))
                return lat, errors, time.perf_counter() - t0

        lat, errors, took = asyncio.run(load())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out = {
        "cards": n,
        "backend": "sqlite",
        "concurrency": concurrency,
        "requests": len(lat),
        "errors": errors,
        "req_per_s": round(len(lat) / took, 1),
        "p50_ms": round(statistics.median(lat), 2),
        "p99_ms": round(pct(lat, 99), 2),
    }
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--http-seconds", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    results = {"targets": {"p99_ms_5k": 5, "p99_ms_100k": 20, "http_rps": 1000, "http_p99_ms": 50}}
    results["in_process"] = [in_process(n, args.queries) for n in args.sizes]
    results["http"] = over_http(5000, args.http_seconds, args.concurrency)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "retrieval.json").write_text(json.dumps(results, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ip = results["in_process"]
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [r["cards"] for r in ip]
    ax.plot(xs, [r["p50_ms"] for r in ip], "o-", label="p50")
    ax.plot(xs, [r["p99_ms"] for r in ip], "o-", label="p99")
    ax.set_xscale("log")
    ax.set_xlabel("active cards in the namespace")
    ax.set_ylabel("query latency in process (ms)")
    ax.set_title("Hindsight retrieval (SQLite, atom index)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "retrieval.png", dpi=110)


if __name__ == "__main__":
    main()
