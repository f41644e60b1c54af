"""Serving at scale: a realistic query mix in process at 5k / 100k (/ 1M) cards beside the floor
(the index lookup alone) and brute force (every card checked), explain on a share of the
queries, feedback arriving while queries run, the time from a card's change to being served,
RSS and cold load; and over HTTP (wrk) the query endpoint against an empty FastAPI endpoint
returning a body of the same size on the same server stack. Medians of 3 runs, load average
printed with each. SQLite (the embedded default).

    python bench/scale.py [--sizes 5000 100000] [--queries 2000] [--http-seconds 8]
                          [--parts namespaces batch million]

--parts adds, in the same run, many namespaces (bench/scale_namespaces.py), the batch stages
on 1 and 2 worker processes on PostgreSQL (bench/scale_batch.py) and a million cards
(bench/scale_1m.py), each in its own process; their results go into scale.json too.

Writes bench/results/scale.json and scale.png.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.retrieval_data import pct  # noqa: E402
from bench.scale_data import floor_and_brute, seed, states  # noqa: E402

RESULTS = REPO / "bench" / "results"
EXPLAIN_SHARE = 0.1
LATENCIES = tuple(
    f"{part}{p}_ms" for part in ("", "explain_", "cpu_", "explain_cpu_") for p in ("p50", "p99")
)


def load() -> str:
    """The load average, as `uptime` prints it."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _rss_mb() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**20, 1)


def _service(n: int, data_dir: Path):
    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

    settings = Settings(data_dir=data_dir)
    db.upgrade(settings)
    engine = db.make_engine(settings)
    seed(engine, n)
    svc = MemoryService(engine=engine, settings=settings)
    key = create_key(engine=engine, namespace="bench", scopes=["read", "write"])[1]
    return svc, svc.authenticate(key), engine


def _query_run(svc, who, mix: list[dict], detail: list[dict] | None = None) -> dict:
    """One pass of the mix with feedback arriving every 20 ms from another thread (detail: each
    query's CPU, shape and the collector's CPU in it appended, for bench/scale_tail.py)."""
    from memory_core.serve.schemas import FeedbackRequest, QueryRequest

    rnd = random.Random(3)
    plain: list[float] = []
    explained: list[float] = []
    plain_cpu: list[float] = []
    explained_cpu: list[float] = []
    served: list[uuid.UUID] = []
    stop = threading.Event()

    def feedback() -> None:
        while not stop.wait(0.02):
            if served:
                cid = served[rnd.randrange(len(served))]
                svc.feedback(principal=who, card_id=cid, request=FeedbackRequest(outcome="success"))

    fb = threading.Thread(target=feedback)
    fb.start()
    collector = GcClock() if detail is not None else None
    try:
        for i, q in enumerate(mix):
            explain = rnd.random() < EXPLAIN_SHARE
            req = QueryRequest(task_state=q["task_state"], query=q["query"], explain=explain)
            in_gc = collector.ms if collector else 0.0
            t, c = time.perf_counter(), time.thread_time()
            res = svc.query(principal=who, request=req)
            (explained if explain else plain).append((time.perf_counter() - t) * 1000)
            # the query thread's CPU: on a machine shared with other work, the wall clock's
            # tail is mostly time spent waiting for a core
            (explained_cpu if explain else plain_cpu).append((time.thread_time() - c) * 1000)
            served.extend(h.card.card_id for h in res.cards[:1])
            if detail is not None and collector is not None:
                cpu = (explained_cpu if explain else plain_cpu)[-1]
                text = q["query"] is not None
                gc_ms = collector.ms - in_gc
                detail.append({"i": i, "cpu_ms": cpu, "explain": explain, "text": text,
                               "served": len(res.cards), "gc_ms": gc_ms})  # fmt: skip
    finally:
        stop.set()
        fb.join()
        if collector is not None:
            collector.close()
    return {
        "p50_ms": statistics.median(plain),
        "p99_ms": pct(plain, 99),
        "explain_p50_ms": statistics.median(explained),
        "explain_p99_ms": pct(explained, 99),
        "cpu_p50_ms": statistics.median(plain_cpu),
        "cpu_p99_ms": pct(plain_cpu, 99),
        "explain_cpu_p50_ms": statistics.median(explained_cpu),
        "explain_cpu_p99_ms": pct(explained_cpu, 99),
        "load": load(),
    }


class GcClock:
    """The CPU the cycle collector takes in this thread, in ms, summed while it is open."""

    def __init__(self) -> None:
        import gc

        self.ms, self._at, self._thread = 0.0, 0.0, threading.get_ident()
        gc.callbacks.append(self._saw)

    def _saw(self, phase: str, info: dict) -> None:
        if threading.get_ident() != self._thread:
            return
        if phase == "start":
            self._at = time.thread_time()
        else:
            self.ms += (time.thread_time() - self._at) * 1000

    def close(self) -> None:
        """Stop counting."""
        import gc

        gc.callbacks.remove(self._saw)


def _floor_and_brute(svc, mix: list[dict]) -> dict:
    """The index lookup alone, and every card checked, on the same states."""
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve

    snap = svc.snapshots.get("bench")
    t = floor_and_brute(snap, mix, brute_states=30)
    r = retrieve(snapshot=snap, state=mix[0]["task_state"], now=utcnow())
    return {
        **_bounded_vs_exhaustive(snap, mix),
        "floor_p50_ms": round(statistics.median(t["floor"]), 3),
        "floor_p99_ms": round(pct(t["floor"], 99), 3),
        "brute_p50_ms": round(statistics.median(t["brute"]), 1),
        "brute_p99_ms": round(pct(t["brute"], 99), 1),
        "mean_candidates": round(statistics.mean(t["cands"]), 1),
        "active_cards": r.active_cards,
    }


def _bounded_vs_exhaustive(snap, mix: list[dict]) -> dict:
    """retrieve() as served (top k by score bounds) and scoring every match, alternating on the
    same states and snapshot, no feedback: the same load for both; the rankings must agree."""
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve

    # CPU time of the thread beside the wall clock: on a loaded machine the wall clock's tail
    # is mostly time spent waiting for a core
    times: dict[str, list[float]] = {k: [] for k in ("bounded", "exhaustive")}
    cpu: dict[str, list[float]] = {k: [] for k in ("bounded", "exhaustive")}
    pair = (("bounded", None), ("exhaustive", 10**9))
    for i, q in enumerate(mix):
        now, ranked = utcnow(), {}
        # each goes first every other query: the first pays for what the other then finds
        # ready (a card's words split, its bound computed)
        for name, cut in pair if i % 2 else pair[::-1]:
            kw = {} if cut is None else {"bounded_from": cut}
            t, c = time.perf_counter(), time.thread_time()
            r = retrieve(snapshot=snap, state=q["task_state"], now=now, query=q["query"], **kw)
            cpu[name].append((time.thread_time() - c) * 1000)
            times[name].append((time.perf_counter() - t) * 1000)
            ranked[name] = [(m.entry.card_id, m.score.score) for m in r.matches]
        assert ranked["bounded"] == ranked["exhaustive"], q
    return {
        f"{name}{part}_{p}_ms": round(statistics.median(v) if p == "p50" else pct(v, 99), 3)
        for part, by in (("", times), ("_cpu", cpu))
        for name, v in by.items()
        for p in ("p50", "p99")
    }


def _change_to_served(svc, who, engine, trials: int = 5) -> list[float]:
    """Seconds from a card archived by another writer (a plain UPDATE, as the nightly run or
    the CLI makes) to the first query that no longer serves it; queries every 5 ms."""
    from sqlalchemy import update

    from memory_core.db import session_scope
    from memory_core.models.card import Card
    from memory_core.serve.schemas import QueryRequest

    out = []
    for q in states(200, seed_=99):
        req = QueryRequest(task_state=q["task_state"], top_k=1, record_use=False)
        hits = svc.query(principal=who, request=req).cards
        if not hits:
            continue
        cid = hits[0].card.card_id
        with session_scope(engine) as s:
            s.execute(update(Card).where(Card.card_id == cid).values(status="archived"))
        t = time.perf_counter()
        while any(h.card.card_id == cid for h in svc.query(principal=who, request=req).cards):
            time.sleep(0.005)
        out.append(round(time.perf_counter() - t, 3))
        if len(out) == trials:
            break
    return out


def in_process(n: int, queries: int, runs: int) -> dict:
    """The mix at n cards: medians of `runs` passes; the store is removed at the end."""
    with tempfile.TemporaryDirectory(prefix="hs-scale-") as tmp:
        return _in_process(n, queries, runs, Path(tmp))


def _in_process(n: int, queries: int, runs: int, data_dir: Path) -> dict:
    svc, who, engine = _service(n, data_dir)
    rss0 = _rss_mb()
    t = time.perf_counter()
    svc.snapshots.get("bench")
    cold = time.perf_counter() - t
    rss = _rss_mb()
    svc.start()
    mix = states(queries)
    passes = []
    for _ in range(runs):
        passes.append(_query_run(svc, who, mix))
        print(json.dumps({"cards": n, **passes[-1]}), flush=True)
    out = {
        "cards": n,
        "cold_load_s": round(cold, 2),
        "snapshot_rss_mb": round(rss - rss0, 1),
        "rss_mb": rss,
        **{k: round(statistics.median(p[k] for p in passes), 3) for k in LATENCIES},
        **_floor_and_brute(svc, mix[:500]),
        "change_to_served_s": _change_to_served(svc, who, engine),
        "whole_reloads": svc.snapshots.reloads,
        "changes_applied": svc.snapshots.applied,
        "runs": passes,
    }
    out["change_to_served_median_s"] = statistics.median(out["change_to_served_s"])
    svc.close()
    engine.dispose()
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}), flush=True)
    return out


def _script(name: str, *argv: str) -> dict:
    """Run bench/<name>.py in its own process (its RSS and caches its own); its JSON."""
    cmd = [sys.executable, str(REPO / "bench" / f"{name}.py"), *argv]
    subprocess.run(cmd, check=True, cwd=REPO)
    out: dict = json.loads((RESULTS / f"{name}.json").read_text())
    return out


def _namespaces(runs: int) -> dict:
    return _script("scale_namespaces", "--runs", str(runs))


def _batch(runs: int) -> dict:
    return _script("scale_batch", "--repeats", str(runs))


def _million(runs: int) -> dict:
    """A million cards seeded (minutes), then loaded and queried in process (one pass: the
    load alone takes minutes)."""
    data = tempfile.mkdtemp(prefix="hs-1m-")
    seed_code = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[2]);"
        "from memory_core import db; from memory_core.settings import Settings;"
        "from bench.scale_data import seed;"
        "s = Settings(data_dir=Path(sys.argv[1])); db.upgrade(s); seed(db.make_engine(s), 10**6)"
    )
    subprocess.run([sys.executable, "-c", seed_code, data, str(REPO)], check=True)
    try:
        return _script("scale_1m", data)
    finally:
        shutil.rmtree(data, ignore_errors=True)


# the parts bench/scale.py can add to one run: what each measures, and how
PARTS = {
    "namespaces": (
        "1, 100 and 1,000 namespaces of 1,000 cards, budgets all and a tenth",
        _namespaces,
    ),
    "batch": ("retrospection, consolidation and decay on 1 and 2 processes (PostgreSQL)", _batch),
    "million": ("1M cards in process: cold load, RSS, query CPU, floor, brute force", _million),
}


def main() -> None:
    """Run the sizes, then HTTP at 5k, then the parts asked for; write the JSON and the plot."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 100_000])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--http-seconds", type=float, default=8.0)
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument("--out", default="scale.json", help="under bench/results (png beside)")
    ap.add_argument("--merge", nargs="*", default=[], help="earlier outputs whose sizes to add")
    ap.add_argument(
        "--parts",
        nargs="*",
        default=[],
        choices=sorted(PARTS),
        help="the other parts of the same run, each in its own process: "
        + "; ".join(f"{k}: {v[0]}" for k, v in sorted(PARTS.items())),
    )
    args = ap.parse_args()
    print(f"load average before: {load()}", flush=True)
    result: dict = {"load_before": load(), "sizes": [], "http": None}
    for n in args.sizes:
        result["sizes"].append(in_process(n, args.queries, args.runs))
    if not args.no_http:
        from bench.scale_http import api_vs_empty

        result["http"] = api_vs_empty(5000, args.http_seconds, runs=args.runs)
    for part in args.parts:
        print(f"part {part}: {PARTS[part][0]}", flush=True)
        result[part] = PARTS[part][1](args.runs)
    result["load_after"] = load()
    for other in args.merge:  # a size run on its own (1M takes its own while)
        result["sizes"] += json.loads((RESULTS / other).read_text())["sizes"]
    result["sizes"].sort(key=lambda s: s["cards"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / args.out
    out.write_text(json.dumps(result, indent=1))
    from bench.scale_plot import plot

    plot(result, out.with_suffix(".png"))
    print(f"load average after: {load()}; wrote {out}", flush=True)


if __name__ == "__main__":
    main()
