"""HTTP for bench/scale.py: `hindsight serve` against the empty endpoint (bench/scale_empty.py)
under the same wrk script; the ratio of their throughputs is the figure. Run alone, it also
measures `hindsight serve --workers 1` and `2` on a throw-away PostgreSQL database:

    python -m bench.scale_http [--seconds 8] [--runs 3] [--workers 1 2] [--no-postgres]

Writes bench/results/scale_http.json.
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


def api_vs_empty(n: int, seconds: float, *, runs: int = 3, warm_all: bool = True) -> dict:
    """The API's query endpoint and the empty one, wrk -c16, medians of `runs`. warm_all: the
    API has served every state of the script once before (bench/retrieval_http.over_http)."""
    api = over_http(n, seconds, 16, runs=runs, client="wrk", warm_all=warm_all)
    body = _response_size(n)
    empty = _empty(body, seconds, runs)
    ratio = round(api["req_per_s"] / empty["req_per_s"], 2)
    out = {"cards": n, "body_bytes": body, "api": api, "empty": empty, "ratio": ratio}
    print(json.dumps({"http_ratio": ratio, "body_bytes": body}), flush=True)
    return out


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
    """API vs empty on SQLite, then --workers on PostgreSQL; writes scale_http.json."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--cold", action="store_true", help="no warm-up pass over every state")
    args = ap.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    result: dict = {"load_before": load, "cpus": os.cpu_count()}
    result["sqlite"] = api_vs_empty(5000, args.seconds, runs=args.runs, warm_all=not args.cold)
    if not args.no_postgres:
        result["postgresql_workers"] = workers_on_postgres(
            5000, args.seconds, runs=args.runs, workers=args.workers
        )
    result["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    path = REPO / "bench" / "results" / "scale_http.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}", flush=True)


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


if __name__ == "__main__":
    main()
