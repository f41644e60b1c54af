"""Memory per API worker: `hindsight serve --workers N` on one SQLite database of 5,000 and
100,000 cards (bench/scale_data), each worker warmed by queries until it holds the namespace's
snapshot; the RSS and PSS (proportional: a page shared by k processes counts 1/k in each) of
the whole server, from /proc, and what each worker added.

    python -m bench.scale_workers [--sizes 5000 100000] [--workers 1 2 4]

With one worker the server is one process (and its watchdog); with N > 1, also the parent that
loaded the snapshots, which forks the N workers. `--against CHECKOUT` measures that checkout's
server on the same databases too. Writes bench/results/scale_workers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.retrieval_http import _wrk_run, _wrk_script, wait_healthy
from bench.scale_data import seed
from bench.scale_http import mix

REPO = Path(__file__).resolve().parents[1]


def _kb(path: Path, field: str) -> int:
    """One `Field:  N kB` line of a /proc status or smaps_rollup file."""
    for line in path.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def tree(pid: int) -> list[int]:
    """A process and its descendants, from /proc/*/stat (no psutil needed)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, parent in parents.items() if parent == p]
    return out


def memory_mb(pid: int) -> dict[str, float]:
    """RSS, PSS and USS (pages no other process maps) of a process tree, MB, and how many
    processes it has."""
    pids = tree(pid)
    rss = sum(_kb(Path(f"/proc/{p}/status"), "VmRSS") for p in pids)
    rollups = [Path(f"/proc/{p}/smaps_rollup") for p in pids]
    pss = sum(_kb(r, "Pss") for r in rollups)
    uss = sum(_kb(r, "Private_Clean") + _kb(r, "Private_Dirty") for r in rollups)
    return {
        "rss_mb": round(rss / 1024, 1),
        "pss_mb": round(pss / 1024, 1),
        "uss_mb": round(uss / 1024, 1),
        "processes": len(pids),
    }


def added(by: list[dict]) -> dict[str, list[float]]:
    """What each worker added to RSS, PSS and USS over the first count, MB per worker."""
    first = by[0]
    return {
        f"{m}_added_per_worker_mb": [
            round((b[f"{m}_mb"] - first[f"{m}_mb"]) / (b["workers"] - first["workers"]), 1)
            for b in by[1:]
        ]
        for m in ("rss", "pss", "uss")
    }


def one(data: Path, script: Path, workers: int, seconds: float, code: Path = REPO) -> dict:
    """The server with `workers` workers, warmed under wrk until its memory settles."""
    port = 18600 + random.randrange(90)
    env = {"HINDSIGHT_DATA_DIR": str(data), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(code)}
    cmd = [str(Path(sys.executable).parent / "hindsight"), "serve", "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--workers", str(workers)], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        runs = []
        for _ in range(6):  # every worker takes connections, loads its snapshot, settles
            r = _wrk_run(url, script, seconds, 16)
            runs.append({**memory_mb(proc.pid), "req_per_s": r["req_per_s"]})
            if len(runs) > 2 and abs(runs[-1]["rss_mb"] - runs[-2]["rss_mb"]) < 10:
                break
        time.sleep(1)
        return {"workers": workers, **memory_mb(proc.pid), "warm_runs": runs}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    """Each size, each worker count; write the JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 100_000])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument(
        "--against", type=Path, help="another checkout: its servers alternate with this one's"
    )
    args = ap.parse_args()
    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.settings import Settings

    result: dict = {"load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()), "sizes": []}
    for n in args.sizes:
        # removed when the size is done, on error and Ctrl-C too
        with tempfile.TemporaryDirectory(prefix="hs-workers-") as d:
            data = Path(d)
            settings = Settings(data_dir=data)
            db.upgrade(settings)
            engine = db.make_engine(settings)
            seed(engine, n)
            key = create_key(engine=engine, namespace="bench", scopes=["read"])[1]
            engine.dispose()
            script = data / "mix.lua"
            _wrk_script(script, key, mix(2000))
            by = [one(data, script, w, args.seconds) for w in args.workers]
            if args.against:  # the other code on the same database, each count right after
                other = [one(data, script, w, args.seconds, args.against) for w in args.workers]
                result.setdefault("against", {"code": str(args.against), "sizes": []})
                result["against"]["sizes"].append({"cards": n, "by_workers": other, **added(other)})
                print(json.dumps({"against": n, **added(other)}), flush=True)
            for b in by:
                print(json.dumps({"cards": n, **{k: v for k, v in b.items() if k != "warm_runs"}}))
            result["sizes"].append({"cards": n, "by_workers": by, **added(by)})
            print(json.dumps({"cards": n, **added(by)}), flush=True)
    result["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    path = REPO / "bench" / "results" / "scale_workers.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
