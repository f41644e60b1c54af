"""Retrieval latency in process at 5,000 / 100,000 / 1,000,000 active cards, and over HTTP
(`hindsight serve` on loopback; wrk as the load generator when installed, else an async httpx
client) at 5,000 cards: 3 runs, medians, with the generator's and the server's CPU.

Cards are seeded by bulk insert with preconditions shaped like the rule extractor's:
`tool == "x"`, `last_tool == "x" && last_error == "..."`, `tool == "x" && retry_count >= n`.
Queries are pre-call states over the same tools and errors, so most match a few cards.
In process = MemoryService.query (atom index, evaluation, ranking, reading the top k rows,
queuing the uses), snapshot already loaded. SQLite (the embedded default) throughout.

    python bench/retrieval.py [--sizes 5000 100000 1000000] [--queries 2000] [--http-seconds 10]
    python bench/retrieval.py --http-only [--client wrk|httpx] [--workers 2]

Writes bench/results/retrieval.json and retrieval.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.retrieval_data import pct, query_states, seed  # noqa: E402
from bench.retrieval_http import over_http  # noqa: E402

RESULTS = REPO / "bench" / "results"


def in_process(n: int, queries: int) -> dict:
    """Queries against n cards in this process; the store is removed at the end."""
    with tempfile.TemporaryDirectory(prefix="hs-bench-") as tmp:
        return _in_process(Path(tmp), n, queries)


def _in_process(tmp: Path, n: int, queries: int) -> dict:
    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

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
    for state in query_states(queries, n):
        t = time.perf_counter()
        res = svc.query(principal=who, request=QueryRequest(task_state=state))
        lat.append((time.perf_counter() - t) * 1000)
        matched.append(len(res.cards))
    snap = svc.snapshots.get("bench")
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve

    for state in query_states(200, n):
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--http-seconds", type=float, default=10.0)
    ap.add_argument("--http-runs", type=int, default=3)
    ap.add_argument("--http-only", action="store_true", help="keep the in-process results")
    ap.add_argument("--client", choices=["auto", "wrk", "httpx"], default="auto")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--out", type=Path, default=RESULTS / "retrieval.json")
    args = ap.parse_args()
    results = {"targets": {"p99_ms_5k": 5, "p99_ms_100k": 20, "http_rps": 1000, "http_p99_ms": 50}}
    if args.http_only:
        if args.out.exists():
            results = json.loads(args.out.read_text())
    else:
        results["in_process"] = [in_process(n, args.queries) for n in args.sizes]
    results["http"] = over_http(
        5000, args.http_seconds, args.concurrency, args.http_runs, args.client, args.workers
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    if args.http_only:
        return
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
