"""A seeded namespace in process without the service (bench/scale.py's full mix takes too long
at 1M cards on a shared machine): cold load, RSS, retrieve CPU and wall (plain right after the
load and again once the lists are ordered in the background, explain), the floor and brute
force.

    python bench/scale_1m.py DATA_DIR [QUERIES] [OUT_JSON] [--file]

DATA_DIR holds a database seeded by bench/scale_data.seed (namespace "bench"). --file: the cold
load reads the namespace's saved snapshot file (DATA_DIR/snapshots, written by
bench/cold_file.py), brought current through the change feed, with its saved list orders.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.retrieval_data import pct  # noqa: E402
from bench.scale_data import floor_and_brute, states  # noqa: E402


def _times(snap, mix: list[dict], **kw) -> dict:
    """retrieve() CPU and wall times over the mix."""
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve

    now, cpu, wall, cands = utcnow(), [], [], []
    for q in mix:
        t, c = time.perf_counter(), time.thread_time()
        r = retrieve(snapshot=snap, state=q["task_state"], now=now, query=q["query"], **kw)
        cpu.append((time.thread_time() - c) * 1000)
        wall.append((time.perf_counter() - t) * 1000)
        cands.append(r.candidates)
    return {
        "cpu_p50": round(statistics.median(cpu), 2),
        "cpu_p99": round(pct(cpu, 99), 2),
        "wall_p50": round(statistics.median(wall), 2),
        "wall_p99": round(pct(wall, 99), 2),
        "candidates": round(statistics.mean(cands)),
        "load": os.getloadavg(),
    }


def _floor_and_brute(snap, mix: list[dict]) -> dict:
    t = floor_and_brute(snap, mix, brute_states=5)
    return {
        "floor_cpu_p50": round(statistics.median(t["floor_cpu"]), 2),
        "floor_cpu_p99": round(pct(t["floor_cpu"], 99), 2),
        "brute_cpu_p50": round(statistics.median(t["brute_cpu"])),
    }


def main() -> None:
    """Load, measure, write the JSON."""
    import psutil

    from memory_core import db
    from memory_core.cel_programs import _ON_USE
    from memory_core.serve.snapshot_cache import SnapshotCache
    from memory_core.serve.snapshot_restore import SnapshotFiles
    from memory_core.settings import Settings

    from_file = "--file" in sys.argv
    args = [a for a in sys.argv if a != "--file"]
    engine = db.make_engine(Settings(data_dir=Path(args[1])))
    queries = int(args[2]) if len(args) > 2 else 400
    out_path = Path(args[3]) if len(args) > 3 else REPO / "bench/results/scale_1m.json"
    files = SnapshotFiles(Path(args[1]) / "snapshots", 1) if from_file else None
    proc = psutil.Process()
    gc.collect()
    r0 = proc.memory_info().rss
    t, c = time.perf_counter(), time.process_time()
    snap = SnapshotCache(engine=engine, files=files).get("bench")
    cold, cold_cpu = time.perf_counter() - t, time.process_time() - c
    r1 = proc.memory_info().rss
    assert snap.from_file == from_file, "the file was not used"
    out: dict = {
        "from_file": from_file,
        "orders_installed": len(snap.orders),
        "cards": len(snap.entries),
        "cold_load_s": round(cold, 1),
        "cold_load_cpu_s": round(cold_cpu, 2),
        "snapshot_rss_mb": round((r1 - r0) / 2**20),
        "bytes_per_card": round((r1 - r0) / max(len(snap.entries), 1)),
        "rss_mb": round(r1 / 2**20),
        "load_after_load": os.getloadavg(),
    }
    print(json.dumps(out), flush=True)
    mix = states(queries)
    started = time.monotonic()
    out["plain"] = _times(snap, mix)
    out["rss_mb_after_plain"] = round(proc.memory_info().rss / 2**20)
    # the first queries order the lists the background ordering (serve/warm.py) has not
    # reached yet; once it is done, new states of the same mix
    while snap.warming not in ("done", "small") and time.monotonic() - started < 300:
        time.sleep(0.1)
    out["ordered_after_s"] = round(time.monotonic() - started, 1)
    out["plain_ordered"] = _times(snap, states(queries, seed_=8))
    out["rss_mb_after_ordered"] = round(proc.memory_info().rss / 2**20)
    out["explain"] = _times(snap, mix[:100], explain=True)
    out["rss_mb_after_explain"] = round(proc.memory_info().rss / 2**20)
    out.update(_floor_and_brute(snap, mix))
    # preconditions compile on first use: what the queries compiled stays with the snapshot
    # (the brute force checks every card: up to cel_programs.MAX_ON_USE programs, ~2 KB each)
    out["rss_mb_end"] = round(proc.memory_info().rss / 2**20)
    out["programs_compiled_on_use"] = len(_ON_USE)
    out["load_end"] = os.getloadavg()
    print(json.dumps(out), flush=True)
    out_path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
