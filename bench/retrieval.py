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


def _wrk_script(path: Path, key: str, states: list[dict]) -> None:
    """A wrk script cycling through the query bodies; prints the summary as one JSON line."""
    bodies = ",\n".join(f"[==[{json.dumps({'task_state': s})}]==]" for s in states)
    path.write_text(
        f"local bodies = {{\n{bodies}\n}}\n"
        "local reqs, i = {}, 0\n"
        "init = function(args)\n"
        "  local h = {['Authorization'] = 'Bearer " + key + "',\n"
        "             ['Content-Type'] = 'application/json'}\n"
        "  for k, b in ipairs(bodies) do\n"
        "    reqs[k] = wrk.format('POST', '/v1/cards/query', h, b)\n"
        "  end\n"
        "end\n"
        "request = function()\n"
        "  i = i % #reqs + 1\n"
        "  return reqs[i]\n"
        "end\n"
        "done = function(s, lat, req)\n"
        "  local e = s.errors\n"
        '  io.write(string.format(\'WRK {"requests": %d, "duration_us": %d, \'\n'
        '    .. \'"non_2xx": %d, "socket_errors": %d, "p50_us": %d, "p90_us": %d, \'\n'
        '    .. \'"p99_us": %d, "max_us": %d}\\n\', s.requests, s.duration, e.status,\n'
        "    e.connect + e.read + e.write + e.timeout, lat:percentile(50), lat:percentile(90),\n"
        "    lat:percentile(99), lat.max))\n"
        "end\n"
    )


def _wrk_run(url: str, script: Path, seconds: float, concurrency: int) -> dict:
    """One wrk run (one thread: it is C and needs far less than a core)."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{seconds:g}s",
            "--timeout",
            "10s",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    w = json.loads(next(line[4:] for line in out.splitlines() if line.startswith("WRK ")))
    took = w["duration_us"] / 1e6
    return {
        "requests": w["requests"],
        "errors": w["non_2xx"] + w["socket_errors"],
        "req_per_s": round(w["requests"] / took, 1),
        "p50_ms": round(w["p50_us"] / 1000, 2),
        "p90_ms": round(w["p90_us"] / 1000, 2),
        "p99_ms": round(w["p99_us"] / 1000, 2),
        "max_ms": round(w["max_us"] / 1000, 2),
        "seconds": round(took, 2),
        "generator_cpu_cores": round(
            (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / took, 2
        ),
    }


def _httpx_run(url: str, key: str, states: list[dict], seconds: float, concurrency: int) -> dict:
    """One run of the async httpx client (in this process: its CPU is the generator's)."""
    import httpx

    async def load() -> tuple[list[float], int, float]:
        lat: list[float] = []
        errors = 0
        limits = httpx.Limits(max_connections=concurrency)
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits) as c:
            stop = time.perf_counter() + seconds

            async def worker(w: int) -> None:
                nonlocal errors
                i = w
                while time.perf_counter() < stop:
                    t = time.perf_counter()
                    r = await c.post(
                        "/v1/cards/query", json={"task_state": states[i % len(states)]}
                    )
                    lat.append((time.perf_counter() - t) * 1000)
                    errors += r.status_code != 200
                    i += concurrency

            t0 = time.perf_counter()
            await asyncio.gather(*(worker(w) for w in range(concurrency)))
            return lat, errors, time.perf_counter() - t0

    cpu0 = time.process_time()
    lat, errors, took = asyncio.run(load())
    cpu = time.process_time() - cpu0
    return {
        "requests": len(lat),
        "errors": errors,
        "req_per_s": round(len(lat) / took, 1),
        "p50_ms": round(statistics.median(lat), 2),
        "p90_ms": round(pct(lat, 90), 2),
        "p99_ms": round(pct(lat, 99), 2),
        "max_ms": round(max(lat), 2),
        "seconds": round(took, 2),
        "generator_cpu_cores": round(cpu / took, 2),
    }


def over_http(
    n: int, seconds: float, concurrency: int, runs: int = 3, client: str = "auto", workers: int = 1
) -> dict:
    """`hindsight serve` on loopback under a load generator: wrk when installed (C, light on
    the 2 cores it shares with the server), else the async httpx client. Median of the runs."""
    import shutil
    import subprocess

    import httpx
    import psutil

    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.settings import Settings

    if client == "auto":
        client = "wrk" if shutil.which("wrk") else "httpx"
    tmp = Path(tempfile.mkdtemp(prefix="hs-bench-http-"))
    settings = Settings(data_dir=tmp)
    db.upgrade(settings)
    engine = db.make_engine(settings)
    seed(engine, n)
    key = create_key(engine=engine, namespace="bench", scopes=["read"])[1]
    port = 18900 + random.randrange(90)
    exe = Path(sys.executable).parent / "hindsight"
    # the server runs this checkout's code
    env = {"HINDSIGHT_DATA_DIR": str(tmp), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    cmd = [str(exe), "serve", "--port", str(port)]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    proc = subprocess.Popen(cmd, env=env)
    url = f"http://127.0.0.1:{port}"
    states = _states(5000, n)
    script = tmp / "query.lua"
    _wrk_script(script, key, states)
    out_runs = []
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as c:
            for s in states[:200]:  # warm-up: snapshot loaded, key cached (in every worker)
                c.post("/v1/cards/query", json={"task_state": s})
        server = psutil.Process(proc.pid)
        for _ in range(runs):
            procs = [server, *server.children(recursive=True)]
            cpu0 = sum(sum(p.cpu_times()[:2]) for p in procs)
            if client == "wrk":
                r = _wrk_run(url, script, seconds, concurrency)
            else:
                r = _httpx_run(url, key, states, seconds, concurrency)
            cpu = sum(sum(p.cpu_times()[:2]) for p in procs) - cpu0
            r["server_cpu_cores"] = round(cpu / r["seconds"], 2)
            r["server_rss_mb"] = round(sum(p.memory_info().rss for p in procs) / 2**20)
            print(json.dumps(r), flush=True)
            out_runs.append(r)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    def med(k: str) -> float:
        return statistics.median(r[k] for r in out_runs)

    out = {
        "cards": n,
        "backend": "sqlite",
        "generator": "wrk -t1 (C)" if client == "wrk" else "httpx.AsyncClient (this process)",
        "concurrency": concurrency,
        "workers": workers,
        "seconds_per_run": seconds,
        "errors": sum(r["errors"] for r in out_runs),
        **{
            k: med(k)
            for k in (
                "req_per_s",
                "p50_ms",
                "p90_ms",
                "p99_ms",
                "generator_cpu_cores",
                "server_cpu_cores",
                "server_rss_mb",
            )
        },
        "runs": out_runs,
    }
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}), flush=True)
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
