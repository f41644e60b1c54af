"""LLM retrospection throughput and pre-filter savings, against a scripted OpenAI-compatible
server with a fixed latency (the real `openai` client, the real Prefect flow, SQLite). The server
runs in its own process, as a real LLM service would (`--server-in-process` to compare).

    python bench/llm_retrospect.py [--latency 0.5] [--concurrency 8] [--repeats 3]

Writes bench/results/llm_retrospect.json and .png. Prefect start-up is excluded (one warm-up
flow run first); each repeat runs on a fresh database.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"


def prefilter_tokens() -> dict[str, float]:
    """Estimated prompt tokens per tau-bench run, before and after the pre-filter."""
    from memory_core.ingest.formats import parse_record
    from memory_core.retrospect.prefilter import FilterLimits, render
    from tests.helpers.data import tau_runs

    before, after = [], []
    for i, rec in enumerate(tau_runs()):
        t = parse_record(
            rec, name=str(i), namespace="b", task_type="default", max_observation_chars=10**9
        )
        f = render(t.steps, header="", limits=FilterLimits())
        before.append(f.tokens_before)
        after.append(f.tokens_after)
    return {
        "median_before": statistics.median(before),
        "median_after": statistics.median(after),
        "total_before": sum(before),
        "total_after": sum(after),
        "reduction": 1 - sum(after) / sum(before),
    }


def one_run(server_url: str, concurrency: int) -> dict[str, float]:
    """Ingest the tau-bench runs into a fresh database and time the retrospect flow."""
    from flows.params import RetrospectParams
    from flows.retrospect import retrospect
    from memory_core import db
    from memory_core.ingest.store import ingest, iter_sources
    from memory_core.settings import Settings
    from tests.helpers.data import tau_path

    data = Path(tempfile.mkdtemp(prefix="hindsight-llm-bench-"))
    os.environ.update(
        {
            "HINDSIGHT_DATA_DIR": str(data),
            "HINDSIGHT_LLM__BASE_URL": server_url,
            "HINDSIGHT_LLM__MODEL": "scripted-1",
            "HINDSIGHT_LLM__MODE": "instead",
            "HINDSIGHT_LLM__CONCURRENCY": str(concurrency),
        }
    )
    settings = Settings()
    db.upgrade(settings)
    engine = db.make_engine(settings)
    ingest(
        engine=engine,
        records=iter_sources([str(tau_path())]),
        namespace="default",
        task_type="default",
    )
    start = time.perf_counter()
    summary = retrospect(RetrospectParams())
    elapsed = time.perf_counter() - start
    assert summary.trajectories == 140 and summary.dead_letters == 0, summary
    return {
        "seconds": elapsed,
        "trajectories_per_s": summary.trajectories / elapsed,
        "llm_calls": summary.llm_calls,
        "cards": summary.cards_created,
        "tokens_sent_per_trajectory": summary.tokens_sent / summary.trajectories,
    }


def _serve(latency: float, urls: Any, stop: Any, stats: Any) -> None:
    """The scripted server in its own process, as a real LLM service would be."""
    sys.path.insert(0, str(REPO))
    from tests.helpers import fake_model
    from tests.helpers.scripted_llm import ScriptedLLM

    with ScriptedLLM(fake_model.respond, latency_s=latency) as server:
        urls.put(server.url)
        stop.wait()
        stats.put(server.max_in_flight)


@contextmanager
def llm_server(latency: float, in_process: bool) -> Iterator[tuple[str, Callable[[], int]]]:
    """(url, max calls in flight so far) of a scripted server, in this process or its own."""
    if in_process:
        from tests.helpers import fake_model
        from tests.helpers.scripted_llm import ScriptedLLM

        with ScriptedLLM(fake_model.respond, latency_s=latency) as server:
            yield server.url, lambda: server.max_in_flight
        return
    ctx = multiprocessing.get_context("spawn")
    urls, stats, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve, args=(latency, urls, stop, stats), daemon=True)
    proc.start()
    seen: list[int] = []

    def max_in_flight() -> int:
        if not seen:
            stop.set()
            seen.append(stats.get(timeout=30))
        return seen[0]

    try:
        yield urls.get(timeout=60), max_in_flight
    finally:
        stop.set()
        proc.join(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--server-in-process",
        action="store_true",
        help="run the scripted server on this process's threads (its CPU then competes)",
    )
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from prefect.testing.utilities import prefect_test_harness

    from flows.naming import inline_runs

    tokens = prefilter_tokens()
    runs = []
    with (
        prefect_test_harness(server_startup_timeout=120),
        inline_runs(),  # as `hindsight retrospect` runs it
        llm_server(args.latency, args.server_in_process) as (url, in_flight),
    ):
        one_run(url, args.concurrency)  # warm-up: Prefect start-up is not measured
        for _ in range(args.repeats):
            runs.append(one_run(url, args.concurrency))
            print(json.dumps(runs[-1]))
        max_in_flight = in_flight()
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    calls_per_traj = med["llm_calls"] / 140
    bound = args.concurrency / (calls_per_traj * args.latency) if args.latency else float("inf")
    result = {
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "repeats": args.repeats,
        "median": med,
        "runs": runs,
        "max_in_flight": max_in_flight,
        "server": "in process" if args.server_in_process else "own process",
        "calls_per_trajectory": calls_per_traj,
        "bound_trajectories_per_s": bound,
        "prefilter": tokens,
        "target": {"trajectories_per_s": 12, "token_reduction": 0.4},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "llm_retrospect.json").write_text(json.dumps(result, indent=2))
    print(
        f"throughput {med['trajectories_per_s']:.2f} trajectories/s (median of "
        f"{args.repeats}; bound at {calls_per_traj:.2f} calls/trajectory: {bound:.1f}/s), "
        f"max {max_in_flight} calls in flight"
    )
    print(
        f"pre-filter: median {tokens['median_before']:.0f} -> {tokens['median_after']:.0f} "
        f"estimated tokens per run, {tokens['reduction']:.0%} fewer in total"
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.bar(
        ["measured", "bound (latency x calls)", "target"],
        [med["trajectories_per_s"], bound, 12],
        color=["tab:blue", "tab:gray", "tab:green"],
    )
    a.set(
        ylabel="trajectories / s", title=f"{args.latency}s latency, concurrency {args.concurrency}"
    )
    b.bar(["before", "after"], [tokens["median_before"], tokens["median_after"]])
    b.set(
        ylabel="estimated tokens per run (median)",
        title=f"pre-filter: {tokens['reduction']:.0%} fewer",
    )
    fig.tight_layout()
    fig.savefig(RESULTS / "llm_retrospect.png", dpi=110)
    print(f"wrote {RESULTS / 'llm_retrospect.json'} and .png")


if __name__ == "__main__":
    main()
