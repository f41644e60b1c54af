"""Retrieval over HTTP: `hindsight serve` on loopback under wrk (else an async httpx client),
median of the runs, with the generator's and the server's CPU. Run by bench/retrieval.py."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.retrieval_data import pct, query_states, seed

REPO = Path(__file__).resolve().parents[1]


def wait_healthy(url: str, tries: int = 300) -> None:
    """Until the server at url answers /healthz (a refused connection: try again shortly)."""
    import httpx

    for _ in range(tries):
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)


def _uses_written(url: str) -> int:
    """The server's uses written so far (its readiness report)."""
    import httpx

    return int(httpx.get(f"{url}/readyz", timeout=30).json()["uses_written"])


def _wrk_script(path: Path, key: str, bodies: list[dict]) -> None:
    """A wrk script cycling through the query bodies; prints the summary as one JSON line."""
    quoted = ",\n".join(f"[==[{json.dumps(b)}]==]" for b in bodies)
    path.write_text(
        f"local bodies = {{\n{quoted}\n}}\n"
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
    n: int,
    seconds: float,
    concurrency: int,
    runs: int = 3,
    client: str = "auto",
    workers: int = 1,
    *,
    warm_all: bool = False,
    database_url: str | None = None,
) -> dict:
    """`hindsight serve` on loopback under a load generator: wrk when installed (C, light on
    the 2 cores it shares with the server), else the async httpx client. Median of the runs.
    warm_all: every state of the script is queried once before the runs (each card served is
    then in the served-row cache: the steady state; else the first runs also measure first
    serves, a database read each). database_url: PostgreSQL instead of SQLite."""
    import shutil
    import subprocess

    import httpx
    import psutil

    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.settings import Settings

    if client == "auto":
        client = "wrk" if shutil.which("wrk") else "httpx"
    tmp = Path(
        tempfile.mkdtemp(prefix="hs-bench-http-")
    )  # removed at the end, on error and Ctrl-C too
    proc: subprocess.Popen | None = None
    out_runs = []
    try:
        settings = Settings(data_dir=tmp, database_url=database_url)
        db.upgrade(settings)
        engine = db.make_engine(settings)
        seed(engine, n)
        key = create_key(engine=engine, namespace="bench", scopes=["read"])[1]
        port = 18900 + random.randrange(90)
        exe = Path(sys.executable).parent / "hindsight"
        # the server runs this checkout's code
        env = {"HINDSIGHT_DATA_DIR": str(tmp), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
        if database_url:
            env["HINDSIGHT_DATABASE_URL"] = database_url
        cmd = [str(exe), "serve", "--port", str(port)]
        if workers > 1:
            cmd += ["--workers", str(workers)]
        proc = subprocess.Popen(cmd, env=env)
        url = f"http://127.0.0.1:{port}"
        states = query_states(5000, n)
        script = tmp / "query.lua"
        _wrk_script(script, key, [{"task_state": s} for s in states])
        wait_healthy(url)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as c:
            # warm-up: snapshot loaded, key cached (in every worker); with warm_all, each
            # state once, so every card the runs serve was served before
            for s in states if warm_all else states[:200]:
                c.post("/v1/cards/query", json={"task_state": s})
        if warm_all and client == "wrk":  # one run unrecorded: its connections reach every worker
            _wrk_run(url, script, seconds, concurrency)
        server = psutil.Process(proc.pid)
        for _ in range(runs):
            procs = [server, *server.children(recursive=True)]
            cpu0 = sum(sum(p.cpu_times()[:2]) for p in procs)
            written0 = _uses_written(url)
            if client == "wrk":
                r = _wrk_run(url, script, seconds, concurrency)
            else:
                r = _httpx_run(url, key, states, seconds, concurrency)
            cpu = sum(sum(p.cpu_times()[:2]) for p in procs) - cpu0
            if workers == 1:  # /readyz counts one worker's uses
                during = _uses_written(url) - written0
                time.sleep(1.0)  # the writer's queue drains (it flushes every 0.25 s)
                # the share of the run's uses written while it ran: a writer that keeps up
                # leaves only its last quarter second behind
                r["uses_written_during_run"] = round(
                    during / max(_uses_written(url) - written0, 1), 3
                )
            r["server_cpu_cores"] = round(cpu / r["seconds"], 2)
            r["server_rss_mb"] = round(sum(p.memory_info().rss for p in procs) / 2**20)
            print(json.dumps(r), flush=True)
            out_runs.append(r)
    finally:
        try:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
        finally:
            shutil.rmtree(tmp)

    def med(k: str) -> float:
        return statistics.median(r[k] for r in out_runs)

    out = {
        "cards": n,
        "backend": "postgresql" if database_url else "sqlite",
        "warm_all": warm_all,
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
        **(
            {"uses_written_during_run": med("uses_written_during_run")}
            if all("uses_written_during_run" in r for r in out_runs)
            else {}
        ),
        "runs": out_runs,
    }
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}), flush=True)
    return out
