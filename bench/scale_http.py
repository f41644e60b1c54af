"""HTTP for bench/scale.py: `hindsight serve` against the empty endpoint (bench/scale_empty.py)
under the same wrk script; the ratio of their throughputs is the figure."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.retrieval_data import query_states
from bench.retrieval_http import _wrk_run, _wrk_script, over_http, wait_healthy

REPO = Path(__file__).resolve().parents[1]


def _empty(body_bytes: int, seconds: float, runs: int) -> dict:

    port = 18990 + random.randrange(9)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "BENCH_BODY_BYTES": str(body_bytes),
    }
    uvicorn = Path(sys.executable).parent / "uvicorn"
    cmd = [str(uvicorn), "bench.scale_empty:app", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen([*cmd, "--no-access-log"], env=env, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    script = Path(tempfile.mkdtemp(prefix="hs-empty-")) / "query.lua"
    _wrk_script(script, "none", query_states(5000, 5000))
    out = []
    try:
        wait_healthy(url)
        for _ in range(runs):
            r = _wrk_run(url, script, seconds, 16)
            r["load"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(json.dumps({"empty": r}), flush=True)
            out.append(r)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {k: statistics.median(r[k] for r in out) for k in ("req_per_s", "p50_ms", "p99_ms")} | {
        "runs": out
    }


def api_vs_empty(n: int, seconds: float, *, runs: int = 3) -> dict:
    """The API's query endpoint and the empty one, wrk -c16, medians of `runs`."""
    api = over_http(n, seconds, 16, runs=runs, client="wrk")
    body = _response_size(n)
    empty = _empty(body, seconds, runs)
    ratio = round(api["req_per_s"] / empty["req_per_s"], 2)
    out = {"cards": n, "body_bytes": body, "api": api, "empty": empty, "ratio": ratio}
    print(json.dumps({"http_ratio": ratio, "body_bytes": body}), flush=True)
    return out


def _response_size(n: int) -> int:
    """The median size of the API's answer to the wrk script's states."""
    from bench.retrieval_data import seed
    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="hs-size-")))
    db.upgrade(settings)
    engine = db.make_engine(settings)
    seed(engine, n)
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(create_key(engine=engine, namespace="bench", scopes=["read"])[1])
    sizes = [
        len(svc.query_json(principal=who, request=QueryRequest(task_state=s, record_use=False)))
        for s in query_states(200, n)
    ]
    return int(statistics.median(sizes))
