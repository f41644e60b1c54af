"""HTTP for bench/scale.py: `hindsight serve` and an empty FastAPI endpoint (bench/scale_empty.py,
the same uvicorn settings, a body of the API's median answer size) both up, loaded alternately
by one wrk on one query mix; the figure is each server's CPU per request, read from
/proc/PID/stat around each run (it counts every thread of the server: the loop, the use
writer, the feed poller), beside throughput and p50/p99. Run alone, it also measures
`hindsight serve --workers 1` and `2` on a throw-away PostgreSQL database:

    python -m bench.scale_http [--seconds 8] [--runs 3] [--workers 1 2] [--no-postgres]

The mix (`mix`): bench/scale_data's cards (5,000; every precondition shape, tools skewed) and
its pre-call states; free text on a third, explain on a tenth, and 15% of the states name
tools, errors and a latency no card has, so they match nothing. Each request records its
uses, as an agent's query does.

Writes bench/results/scale_http.json.
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
from pathlib import Path

from bench.retrieval_http import _wrk_run, _wrk_script, over_http, wait_healthy
from bench.scale_data import seed, states

REPO = Path(__file__).resolve().parents[1]
TEXT_SHARE, EXPLAIN_SHARE, NOTHING_SHARE = 1 / 3, 0.1, 0.15
TICK = os.sysconf("SC_CLK_TCK")


def mix(k: int, seed_: int = 5) -> list[dict]:
    """k query bodies: scale_data's states (a third with free text), explain on a tenth, 15%
    of the states matching no card."""
    rnd = random.Random(seed_)
    out = []
    for i, s in enumerate(states(k, seed_)):
        state = dict(s["task_state"])
        if rnd.random() < NOTHING_SHARE:  # no card names these tools, this error or latency
            state |= {"tool": f"none_{i}", "last_tool": f"none_{i}", "latency_ms": 10**6}
            state |= {"last_error": f"nothing {i}", "last_error_code": f"n{i}"}
        body: dict = {"task_state": state}
        if s["query"]:
            body["query"] = s["query"]
        if rnd.random() < EXPLAIN_SHARE:
            body["explain"] = True
        out.append(body)
    return out


def cpu_s(pid: int) -> float:
    """A process's CPU so far (user + system, every thread), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _warm(url: str, key: str, bodies: list[dict]) -> tuple[int, float]:
    """Every body once (snapshot loaded, key cached, each served card's row cached): the
    median answer size, and the share of bodies no card matched."""
    import httpx

    sizes, empty = [], 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as c:
        for b in bodies:
            r = c.post("/v1/cards/query", json=b, timeout=60)
            r.raise_for_status()
            sizes.append(len(r.content))
            empty += not r.json()["cards"]
    return int(statistics.median(sizes)), round(empty / len(bodies), 3)


def api_vs_empty(
    n: int, seconds: float, *, runs: int = 3, k: int = 2000, variants: dict | None = None
) -> dict:
    """The API and the empty endpoint, alternately under one wrk -c16 on `mix(k)`, `runs`
    runs each: CPU per request, throughput and latency, medians.
    variants: more API servers in the rotation, each with its own environment (HINDSIGHT_*
    settings, or PYTHONPATH=another checkout: two versions of the code in one run)."""
    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="hs-http-"))  # removed at the end, on error and Ctrl-C too
    procs: dict[str, subprocess.Popen] = {}
    try:
        settings = Settings(data_dir=tmp)
        db.upgrade(settings)
        engine = db.make_engine(settings)
        seed(engine, n)
        key = create_key(engine=engine, namespace="bench", scopes=["read"])[1]
        engine.dispose()
        bodies = mix(k)
        script = tmp / "mix.lua"
        _wrk_script(script, key, bodies)
        base = 18800 + random.randrange(90)
        env = {"HINDSIGHT_DATA_DIR": str(tmp), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
        hindsight = str(Path(sys.executable).parent / "hindsight")
        apis = {"api": {}, **(variants or {})}
        urls = {name: f"http://127.0.0.1:{base + i}" for i, name in enumerate(apis)}
        urls["empty"] = f"http://127.0.0.1:{base + 100}"
        for i, (name, extra) in enumerate(apis.items()):
            port = str(base + i)
            procs[name] = subprocess.Popen([hindsight, "serve", "--port", port], env=env | extra)
            wait_healthy(urls[name])
            body_bytes, nothing = _warm(urls[name], key, bodies)
        uvicorn = [str(Path(sys.executable).parent / "uvicorn"), "bench.scale_empty:app"]
        procs["empty"] = subprocess.Popen(
            [*uvicorn, "--port", str(base + 100), "--log-level", "warning", "--no-access-log"],
            env={**env, "BENCH_BODY_BYTES": str(body_bytes)},
            cwd=REPO,
        )
        wait_healthy(urls["empty"])
        for name in procs:  # one run each unrecorded: both warm
            _wrk_run(urls[name], script, min(seconds, 3.0), 16)
        out: dict[str, list[dict]] = {name: [] for name in procs}
        for i in range(runs):
            for name in list(procs) if i % 2 == 0 else list(procs)[::-1]:
                pid = procs[name].pid
                c0 = cpu_s(pid)
                r = _wrk_run(urls[name], script, seconds, 16)
                r["cpu_us_per_request"] = round((cpu_s(pid) - c0) / r["requests"] * 1e6)
                r["rss_mb"] = _rss_mb(pid)
                r["load"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
                print(json.dumps({name: r}), flush=True)
                out[name].append(r)
    finally:
        try:
            for p in procs.values():
                p.terminate()
                p.wait(timeout=30)
        finally:
            shutil.rmtree(tmp)

    keys = ("cpu_us_per_request", "req_per_s", "p50_ms", "p99_ms", "rss_mb", "errors")
    med = {
        name: {key: statistics.median(r[key] for r in rs) for key in keys}
        for name, rs in out.items()
    }
    result = {
        "cards": n,
        "mix": f"{k} bodies: bench/scale_data states, free text on {TEXT_SHARE:.0%}, explain on "
        f"{EXPLAIN_SHARE:.0%}, {NOTHING_SHARE:.0%} matching nothing; uses recorded",
        "matching_nothing": nothing,
        "body_bytes": body_bytes,
        "generator": "wrk -t1 -c16, the two servers alternately",
        "seconds_per_run": seconds,
        **med,
        "cpu_ratio": round(
            med["api"]["cpu_us_per_request"] / med["empty"]["cpu_us_per_request"], 2
        ),
        "throughput_ratio": round(med["api"]["req_per_s"] / med["empty"]["req_per_s"], 2),
        "variants": variants or {},
        **{
            f"{name}_cpu_ratio": round(
                med[name]["cpu_us_per_request"] / med["empty"]["cpu_us_per_request"], 2
            )
            for name in variants or {}
        },
        "runs": out,
    }
    print(
        json.dumps({k: result[k] for k in ("cpu_ratio", "throughput_ratio", "matching_nothing")}),
        flush=True,
    )
    return result


def workers_on_postgres(n: int, seconds: float, *, runs: int, workers: list[int]) -> dict:
    """`hindsight serve --workers N` for each N on a fresh PostgreSQL database (dropped after),
    wrk -c16 against the query endpoint; each N's req/s over the first's is its scaling."""
    import uuid

    import psycopg

    admin = os.environ.get(
        "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    ).replace("postgresql+psycopg://", "postgresql://")
    out: dict = {"cards": n, "backend": "postgresql", "by_workers": {}}
    for w in workers:
        name = f"hindsight_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            url = f"{admin.rsplit('/', 1)[0]}/{name}"
            r = over_http(
                n, seconds, 16, runs=runs, client="wrk", workers=w, warm_all=True, database_url=url
            )
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        r["load"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        out["by_workers"][str(w)] = r
    first = out["by_workers"][str(workers[0])]["req_per_s"]
    out["scaling"] = {
        str(w): round(out["by_workers"][str(w)]["req_per_s"] / first, 2) for w in workers
    }
    print(json.dumps({"workers_scaling": out["scaling"]}), flush=True)
    return out


def main() -> None:
    """API vs empty on SQLite on the mix, then --workers on PostgreSQL; writes scale_http.json."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:VAR=VALUE[,VAR=VALUE]",
        help="one more API server in the rotation, with this environment (settings, PYTHONPATH)",
    )
    args = ap.parse_args()
    variants = {
        name: dict(pair.split("=", 1) for pair in spec.split(","))
        for name, spec in (v.split(":", 1) for v in args.variant)
    }
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    result: dict = {"load_before": load, "cpus": os.cpu_count()}
    result["sqlite"] = api_vs_empty(5000, args.seconds, runs=args.runs, variants=variants)
    if not args.no_postgres:
        result["postgresql_workers"] = workers_on_postgres(
            5000, args.seconds, runs=args.runs, workers=args.workers
        )
    result["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    path = REPO / "bench" / "results" / "scale_http.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
