"""Queries while cards are written: `hindsight serve` on loopback with 5,000 cards, query
throughput and latency under the async httpx client, in runs without writes and runs with a
steady stream of card writes (POST /v1/cards, 5 a second, each a new card), alternated.

    python -m bench.card_writes [--seconds 20] [--runs 3] [--rate 5] [--code DIR]

--code runs the server from another checkout (say, one from before the change) for a
before/after. Writes bench/results/card_writes.json (medians and the runs; the ratios are
"with writes" over "without"). Each round runs both, back to back (in turn first), so the
paired ratios compare runs under the same load of the host: their median is the figure to
quote on a shared machine, where the medians of each side drift with the load between rounds.
The server's CPU is read from /proc around each run: a write's share of it (what the run
with writes spent beyond its queries at the paired run's cost a query) gives the throughput
ratio a server with a core to itself would reach, 1 - rate x CPU a write, which other work
on the host does not move.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.retrieval_data import query_states, seed
from bench.retrieval_http import _httpx_run, wait_healthy

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "card_writes.json"


def _writer(url: str, key: str, rate: float, stop: threading.Event, out: list[float]) -> None:
    """POST a new card every 1/rate seconds until stopped, each on time whether or not the
    ones before were answered (a slow write must not thin the stream); each write's latency
    (ms)."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    n = random.randrange(10**9)
    headers = {"Authorization": f"Bearer {key}"}

    def post(c: httpx.Client, n: int) -> None:
        card = {
            "scenario": f"written card {n}: wait before calling tool_{n % 50} again",
            "preconditions": [f'tool == "tool_{n % 50}"', "retry_count < 3"],
            "action_sequence": [{"tool": f"tool_{n % 50}", "note": "back off"}],
            "failure_modes": [{"mode": "rate limited", "handling": "wait, then retry"}],
            "confidence": 0.8,
        }
        t = time.perf_counter()
        r = c.post("/v1/cards", json=card)
        out.append((time.perf_counter() - t) * 1000)
        if r.status_code != 201:
            raise RuntimeError(f"a card write failed: {r.status_code} {r.text[:200]}")

    with (
        httpx.Client(base_url=url, headers=headers, timeout=60) as c,
        ThreadPoolExecutor(max_workers=16) as pool,
    ):
        next_at, sent = time.perf_counter(), []
        while not stop.is_set():
            n += 1
            sent.append(pool.submit(post, c, n))
            next_at += 1 / rate
            stop.wait(max(next_at - time.perf_counter(), 0))
        for f in sent:
            f.result()  # a failed write fails the run


def _cpu_s(pid: int) -> float:
    """The process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pair(without: dict, with_: dict, rate: float) -> dict:
    """One round's ratios. write_cpu_ms: the server's CPU a write, over what its queries cost
    at the paired run's rate; cpu: the throughput ratio it implies for a server with a core to
    itself (1 - rate x that), which other work on the host does not move."""
    queries = with_["requests"] * without["server_cpu_ms_per_query"] / 1000
    write_ms = (with_["server_cpu_s"] - queries) * 1000 / max(with_["writes"], 1)
    return {
        "throughput": round(with_["req_per_s"] / without["req_per_s"], 3),
        "p99": round(with_["p99_ms"] / without["p99_ms"], 3),
        "write_cpu_ms": round(write_ms, 2),
        "cpu": round(1 - rate * write_ms / 1000, 3),
        "load": with_["load"],
    }


def measure(seconds: float, runs: int, rate: float, code: Path, concurrency: int) -> dict:
    """Alternated runs without and with writes against one server; medians of each."""
    # the store is removed at the end, on error and Ctrl-C too
    with tempfile.TemporaryDirectory(prefix="hs-bench-writes-") as tmp:
        return _measure(Path(tmp), seconds, runs, rate, code, concurrency)


def _measure(
    tmp: Path, seconds: float, runs: int, rate: float, code: Path, concurrency: int
) -> dict:
    """measure() in the store at tmp."""
    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.settings import Settings

    settings = Settings(data_dir=tmp)
    db.upgrade(settings)
    engine = db.make_engine(settings)
    seed(engine, 5000)
    reader = create_key(engine=engine, namespace="bench", scopes=["read"])[1]
    writer = create_key(engine=engine, namespace="bench", scopes=["read", "write", "admin"])[1]
    port = 18800 + random.randrange(90)
    env = {"HINDSIGHT_DATA_DIR": str(tmp), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(code)}
    exe = Path(sys.executable).parent / "hindsight"
    proc = subprocess.Popen([str(exe), "serve", "--port", str(port)], env=env, cwd=code)
    url = f"http://127.0.0.1:{port}"
    states = query_states(5000, 5000)
    out: dict[str, list[dict]] = {"without": [], "with": []}
    try:
        wait_healthy(url)
        _httpx_run(url, reader, states, min(seconds, 5), concurrency)  # warm-up, unrecorded
        for i in range(runs):
            for mode in ("without", "with") if i % 2 == 0 else ("with", "without"):
                stop, lat = threading.Event(), []
                t = threading.Thread(target=_writer, args=(url, writer, rate, stop, lat))
                if mode == "with":
                    t.start()
                cpu = _cpu_s(proc.pid)
                r = _httpx_run(url, reader, states, seconds, concurrency)
                r["server_cpu_s"] = round(_cpu_s(proc.pid) - cpu, 3)
                # the server's own CPU a query (a write's included): what a busy host's other
                # work does not change, unlike the rate it leaves the server
                r["server_cpu_ms_per_query"] = round(
                    r["server_cpu_s"] * 1000 / max(r["requests"], 1), 3
                )
                if mode == "with":
                    stop.set()
                    t.join()
                    r["writes"] = len(lat)
                    r["write_p50_ms"] = round(statistics.median(lat), 1) if lat else None
                r["load"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
                print(json.dumps({mode: r}), flush=True)
                out[mode].append(r)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    def med(mode: str, k: str) -> float:
        return statistics.median(r[k] for r in out[mode])

    paired = [_pair(wo, w, rate) for wo, w in zip(out["without"], out["with"], strict=True)]

    summary = {mode: {k: med(mode, k) for k in ("req_per_s", "p50_ms", "p99_ms")} for mode in out}
    return {
        "cards": 5000,
        "write_rate_per_s": rate,
        "concurrency": concurrency,
        "seconds_per_run": seconds,
        "code": "this checkout" if code == REPO else str(code),
        **summary,
        "throughput_ratio": round(
            summary["with"]["req_per_s"] / summary["without"]["req_per_s"], 3
        ),
        "p99_ratio": round(summary["with"]["p99_ms"] / summary["without"]["p99_ms"], 3),
        "paired_throughput_ratio_median": statistics.median(p["throughput"] for p in paired),
        "paired_p99_ratio_median": statistics.median(p["p99"] for p in paired),
        "paired_write_cpu_ms_median": statistics.median(p["write_cpu_ms"] for p in paired),
        "paired_cpu_ratio_median": statistics.median(p["cpu"] for p in paired),
        "paired": paired,
        "writes_per_run": [r["writes"] for r in out["with"]],
        "runs": out,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=5)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--code", type=Path, default=REPO, help="the checkout the server runs")
    ap.add_argument(
        "--out",
        type=Path,
        help="where to write the result (default: "
        "bench/results/card_writes.json for this checkout, none for another)",
    )
    args = ap.parse_args()
    result = measure(args.seconds, args.runs, args.rate, args.code.resolve(), args.concurrency)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    out = args.out or (RESULTS if args.code.resolve() == REPO else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
