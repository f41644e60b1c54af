"""The query CPU tail at scale, old code against new, alternated in one run: each round runs
bench/scale.py's in-process mix (feedback arriving meanwhile, explain on a tenth, free text on
a third) in a fresh process per tree, the two trees taking turns to go first, and reports each
tree's query CPU p50/p99 (plain and explained; the median of the passes, as scale.json does),
the ratio new/old per round, and what the slowest 1% of plain queries were (free text, cards
served, the collector's CPU inside them).

    python bench/scale_tail.py --old /path/to/a/checkout/of/main [--cards 100000]
                               [--rounds 3] [--runs 3] [--queries 2000]

The old tree is any checkout (git worktree or archive) whose memory_core is measured; this
tree's bench code drives both. Writes bench/results/scale_tail.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
FIGURES = ("cpu_p50_ms", "cpu_p99_ms", "explain_cpu_p50_ms", "explain_cpu_p99_ms")


def child(tree: str, cards: int, queries: int, runs: int) -> dict:
    """In this process: the tree's memory_core under this tree's bench code, `runs` passes."""
    sys.path.insert(0, tree)
    import memory_core  # the tree measured: its package is the one imported below

    sys.path.remove(tree)
    sys.path.insert(0, str(REPO))
    from bench.retrieval_data import pct
    from bench.scale import _query_run, _service
    from bench.scale_data import states

    tmp = tempfile.TemporaryDirectory(prefix="hs-tail-")  # the store, removed at the end
    svc, who, _ = _service(cards, Path(tmp.name))
    svc.snapshots.get("bench")
    svc.start()
    mix = states(queries)
    passes, slowest = [], []
    try:
        for _ in range(runs):
            detail: list[dict] = []
            passes.append(_query_run(svc, who, mix, detail))
            plain = [d for d in detail if not d["explain"]]
            cut = pct([d["cpu_ms"] for d in plain], 99)
            tail = [d for d in plain if d["cpu_ms"] >= cut]
            slowest.append(
                {
                    "queries": len(tail),
                    "free_text": sum(d["text"] for d in tail),
                    "gc_ms_median": round(statistics.median(d["gc_ms"] for d in tail), 3),
                    "gc_share": round(
                        sum(d["gc_ms"] for d in tail) / sum(d["cpu_ms"] for d in tail), 3
                    ),
                    "all_gc_ms": round(sum(d["gc_ms"] for d in detail), 1),
                }
            )
    finally:
        svc.close()
        tmp.cleanup()
    return {
        "tree": memory_core.__file__,
        **{k: round(statistics.median(p[k] for p in passes), 3) for k in FIGURES},
        "passes": [{k: round(p[k], 3) for k in FIGURES} | {"load": p["load"]} for p in passes],
        "slowest_1pct": slowest,
    }


def run_side(tree: str, args: argparse.Namespace) -> dict:
    """One tree's passes in a process of their own."""
    cmd = [sys.executable, __file__, "--child", tree, "--cards", str(args.cards)]
    cmd += ["--queries", str(args.queries), "--runs", str(args.runs)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Alternate the two trees, print each run and the ratios, write the JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", help="a checkout of the code to compare with")
    ap.add_argument("--cards", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="passes of the mix per process")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.cards, args.queries, args.runs)), flush=True)
        return
    sides = {"new": str(REPO)} | ({"old": str(Path(args.old).resolve())} if args.old else {})
    load = lambda: " ".join(f"{x:.2f}" for x in os.getloadavg())  # noqa: E731
    result: dict = {"cards": args.cards, "load_before": load(), "rounds": []}
    for r in range(args.rounds):
        order = list(sides) if r % 2 else list(sides)[::-1]  # each goes first every other round
        got = {name: run_side(sides[name], args) for name in order}
        got["load"] = load()
        if "old" in got:
            got["ratio"] = {k: round(got["new"][k] / got["old"][k], 3) for k in FIGURES}
        result["rounds"].append(got)
        print(json.dumps({k: v for k, v in got.items()}), flush=True)
    for name in sides:
        result[name] = {
            k: round(statistics.median(g[name][k] for g in result["rounds"]), 3) for k in FIGURES
        }
    if "old" in sides:
        result["ratio_median"] = {
            k: round(statistics.median(g["ratio"][k] for g in result["rounds"]), 3) for k in FIGURES
        }
    result["load_after"] = load()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale_tail.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}), flush=True)


if __name__ == "__main__":
    main()
