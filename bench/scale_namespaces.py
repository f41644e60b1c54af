"""Many namespaces served from one process: 1, 100 and 1,000 namespaces of 1,000 cards each
(bench/scale_data.py's card shapes), a query mix spread over the namespaces with Zipf-like skew
(the k-th most used namespace gets 1/k of the hottest one's queries), in process through
MemoryService.query (uses recorded, the change feed read as served). Two budgets
(HINDSIGHT_SERVE__MAX_CACHED_CARDS): one that holds every namespace, one that holds a tenth.
Per run: p50/p99 of warm queries (the namespace was in memory) and of cold ones (the first query
of a namespace not in memory, which loads it), RSS, evictions. Each run is a fresh process (its
RSS is its own); medians of 3, load average printed with each. SQLite (the embedded default).

    python bench/scale_namespaces.py [--namespaces 1 100 1000] [--queries 2000] [--runs 3]

Writes bench/results/scale_namespaces.json and scale_namespaces.png.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.retrieval_data import pct  # noqa: E402
from bench.scale_data import ERRORS, TOOLS, preconditions, states  # noqa: E402

RESULTS = REPO / "bench" / "results"


def load() -> str:
    """The load average, as `uptime` prints it."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def ns_name(i: int) -> str:
    """The i-th namespace (0 the most queried)."""
    return f"tenant-{i:04d}"


def seed_many(engine, namespaces: int, per: int) -> None:
    """`per` cards in each of `namespaces` namespaces, bulk inserted. bench/scale_data.seed
    draws the same card ids in every namespace (one fixed seed), so the rows are made here,
    with its precondition shapes."""
    from sqlalchemy import insert

    from memory_core.db import session_scope
    from memory_core.models.card import Card
    from memory_core.models.columns import utcnow

    rnd = random.Random(11)
    now = utcnow()
    rows: list[dict] = []
    for k, i in itertools.product(range(namespaces), range(per)):
        pre = preconditions(i, rnd)
        rows.append(
            {
                "card_id": uuid.UUID(int=rnd.getrandbits(128)),
                "namespace": ns_name(k),
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
        if len(rows) == 20_000:
            with session_scope(engine) as session:
                session.execute(insert(Card), rows)
            rows = []
    if rows:
        with session_scope(engine) as session:
            session.execute(insert(Card), rows)


def _rss_mb() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**20, 1)


def worker(data_dir: Path, namespaces: int, queries: int, rep: int, freeze: bool) -> dict:
    """One run in this (fresh) process; the budget comes from the environment."""
    from memory_core import db
    from memory_core.serve.keys import Principal
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

    settings = Settings(data_dir=data_dir)
    svc = MemoryService(engine=db.make_engine(settings), settings=settings)
    if freeze:  # as the API server does (memory_api.app.freeze_long_lived after each load)
        from memory_api.app import freeze_long_lived

        svc.snapshots.on_load = freeze_long_lived
        freeze_long_lived()
    svc.start()
    who = [
        Principal(key_id=uuid.uuid4(), namespace=ns_name(i), scopes=frozenset({"read"}))
        for i in range(namespaces)
    ]
    rnd = random.Random(100 + rep)
    zipf = [1 / (k + 1) for k in range(namespaces)]
    picks = rnd.choices(range(namespaces), weights=zipf, k=queries)
    mix = states(queries, seed_=rep)
    rss0 = _rss_mb()
    warm: list[float] = []
    cold: list[float] = []
    warm_cpu: list[float] = []  # the thread's CPU time: on a loaded machine the wall clock's
    # tail is mostly waiting for a core
    try:
        for k, q in zip(picks, mix, strict=True):
            req = QueryRequest(task_state=q["task_state"], query=q["query"])
            ready = svc.snapshots.ready(who[k].namespace)
            t, c = time.perf_counter(), time.thread_time()
            svc.query(principal=who[k], request=req)
            (warm if ready else cold).append((time.perf_counter() - t) * 1000)
            if ready:
                warm_cpu.append((time.thread_time() - c) * 1000)
    finally:
        svc.close()
    held, cards = svc.snapshots.cached()
    return {
        "warm_p50_ms": round(statistics.median(warm), 3) if warm else None,
        "warm_p99_ms": round(pct(warm, 99), 3) if warm else None,
        "warm_cpu_p50_ms": round(statistics.median(warm_cpu), 3) if warm else None,
        "warm_cpu_p99_ms": round(pct(warm_cpu, 99), 3) if warm else None,
        "cold_p50_ms": round(statistics.median(cold), 2) if cold else None,
        "cold_p99_ms": round(pct(cold, 99), 2) if cold else None,
        "cold_queries": len(cold),
        "loads": svc.snapshots.loads,
        "evictions": svc.snapshots.evictions,
        "held_namespaces": held,
        "held_cards": cards,
        "rss_start_mb": rss0,
        "rss_mb": _rss_mb(),
        "load": load(),
    }


def _median(runs: list[dict]) -> dict:
    out: dict = {}
    for key, first in runs[0].items():
        vals = [r[key] for r in runs]
        if isinstance(first, (int, float)) and None not in vals:
            out[key] = statistics.median(vals)
    out["load"] = [r["load"] for r in runs]
    return out


def main() -> None:
    """Seed once, then each (namespaces, budget, run) in its own process."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--namespaces", type=int, nargs="+", default=[1, 100, 1000])
    ap.add_argument("--cards", type=int, default=1000, help="per namespace")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-freeze", action="store_true", help="skip the server's gc.freeze")
    ap.add_argument("--data-dir", type=Path, help="a data dir seeded by an earlier run: reused")
    ap.add_argument("--worker", nargs=3, metavar=("DATA_DIR", "NAMESPACES", "REP"))
    args = ap.parse_args()
    if args.worker:
        data, n, rep = args.worker
        print(json.dumps(worker(Path(data), int(n), args.queries, int(rep), not args.no_freeze)))
        return

    from memory_core import db
    from memory_core.settings import Settings

    settings = Settings(data_dir=args.data_dir or Path(tempfile.mkdtemp(prefix="hs-ns-")))
    if args.data_dir is None:  # 1M cards take minutes to write: --data-dir reuses them
        db.upgrade(settings)
        t = time.perf_counter()
        seed_many(db.make_engine(settings), max(args.namespaces), args.cards)
        took = time.perf_counter() - t
        print(f"seeded {max(args.namespaces)} x {args.cards} cards in {took:.0f} s", flush=True)
    result: dict = {"cards_per_namespace": args.cards, "queries": args.queries, "rows": []}
    for n in args.namespaces:
        for budget_name, budget in (("all", n * args.cards), ("tenth", n * args.cards // 10)):
            env = {**os.environ, "HINDSIGHT_SERVE__MAX_CACHED_CARDS": str(max(1, budget))}
            env["HINDSIGHT_HOLDOUT__RATE"] = "0"
            runs = []
            for rep in range(args.runs):
                cmd = [sys.executable, __file__, "--queries", str(args.queries)]
                cmd += ["--worker", str(settings.data_dir), str(n), str(rep)]
                cmd += ["--no-freeze"] if args.no_freeze else []
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            row = {"namespaces": n, "budget": budget_name, "budget_cards": budget}
            row |= _median(runs) | {"runs": runs}
            result["rows"].append(row)
            print(
                f"{n:>5} ns, budget {budget_name:>5}: warm p50/p99 {row.get('warm_p50_ms')}/"
                f"{row.get('warm_p99_ms')} ms (CPU {row.get('warm_cpu_p50_ms')}/"
                f"{row.get('warm_cpu_p99_ms')}), cold p50/p99 {row.get('cold_p50_ms')}/"
                f"{row.get('cold_p99_ms')} ms ({row['cold_queries']} cold), RSS "
                f"{row['rss_mb']} MB, evictions {row['evictions']}, load {row['load']}",
                flush=True,
            )
            RESULTS.mkdir(parents=True, exist_ok=True)  # after each row: a long run in parts
            (RESULTS / "scale_namespaces.json").write_text(json.dumps(result, indent=2) + "\n")
    result["rows"].sort(key=lambda r: (r["namespaces"], r["budget"]))
    (RESULTS / "scale_namespaces.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "scale_namespaces.png")


def plot(result: dict, path: Path) -> None:
    """Warm and cold latency and RSS per namespace count, one line per budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for budget in ("all", "tenth"):
        rows = [r for r in result["rows"] if r["budget"] == budget]
        xs = [str(r["namespaces"]) for r in rows]
        for key, style in (("warm_p50_ms", "-"), ("warm_p99_ms", "--"), ("cold_p50_ms", ":")):
            a.plot(xs, [r.get(key) for r in rows], style, marker="o", label=f"{key} ({budget})")
        b.plot(xs, [r["rss_mb"] for r in rows], marker="o", label=f"RSS, budget {budget}")
    a.set_yscale("log")
    a.set_ylabel("ms")
    a.set_xlabel("namespaces (1,000 cards each)")
    a.set_title("queries spread over namespaces (Zipf)")
    a.legend(fontsize=7)
    b.set_ylabel("MB")
    b.set_xlabel("namespaces")
    b.set_title("RSS at the end of a run")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
