"""Cold load of a seeded namespace from the database and from its saved snapshot file: CPU
and wall, RSS after the load and at its peak, and the first query after it. Each
run is a new process (nothing shared from a run before), database and file alternately.

    python bench/cold_file.py OUT_JSON RUNS SIZE=DATA_DIR [SIZE=DATA_DIR ...]
    python bench/cold_file.py --compare DATA_DIR  # the file's snapshot against a fresh load

Each DATA_DIR holds a database seeded by bench/scale_data.seed (namespace "bench"); its file is
written once (a full load, then save) when it is missing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_core.serve.snapshot_restore import SnapshotFiles

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
NS = "bench"


def _files(data: Path) -> SnapshotFiles:
    from memory_core.serve.snapshot_restore import SnapshotFiles

    return SnapshotFiles(data / "snapshots", 1)


def one(data: Path, mode: str) -> dict:
    """One cold load in this process (mode: database or file), then one query."""
    import psutil

    from bench.scale_data import states
    from memory_core import db
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve
    from memory_core.serve.snapshot_cache import SnapshotCache
    from memory_core.settings import Settings

    engine = db.make_engine(Settings(data_dir=data))
    cache = SnapshotCache(engine=engine, files=_files(data) if mode == "file" else None)
    state = states(1)[0]["task_state"]
    load = os.getloadavg()[0]
    t, c = time.perf_counter(), time.process_time()
    snap = cache.get(NS)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    found = retrieve(snapshot=snap, state=state, now=utcnow(), top_k=5)
    first = time.perf_counter() - t
    assert snap.from_file == (mode == "file"), "the file was not used"
    return {
        "cards": len(snap.entries),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "rss_mb_after_load": round(psutil.Process().memory_info().rss / 2**20),
        "rss_mb_peak": _peak_mb(),
        "first_query_ms": round(first * 1000, 1),
        "first_query_matches": len(found.matches),
        "load_avg_1m": round(load, 2),
    }


def _peak_mb() -> int:
    """This process's peak RSS since exec (VmHWM). Not getrusage's ru_maxrss: Linux carries it
    over from the forking parent, so a child of the full load that wrote the file reported
    that load's peak as its own."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    raise RuntimeError("no VmHWM in /proc/self/status")


def compare(data: Path, n: int = 200) -> dict:
    """A fresh load against the file's: every entry field, the index's statistics, and the
    candidates and top 10 (with scores) of n bench states."""
    from bench.scale_data import states
    from memory_core import db
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve
    from memory_core.serve.snapshot import load_snapshot
    from memory_core.serve.snapshot_restore import cold_load
    from memory_core.settings import Settings

    engine = db.make_engine(Settings(data_dir=data))
    fresh = load_snapshot(engine=engine, namespace=NS)
    saved = cold_load(load_snapshot, _files(data), engine=engine, namespace=NS)
    assert saved.from_file, "the file was not used"
    now, differ, matches = utcnow(), 0, 0
    for q in states(n):
        state, ranked = q["task_state"], []
        for snap in (fresh, saved):
            r = retrieve(snapshot=snap, state=state, now=now, top_k=10, query=q["query"])
            cands = sorted(e.card_id for e in snap.candidates(state))
            ranked.append((cands, [(m.entry.card_id, m.score) for m in r.matches]))
        differ += ranked[0] != ranked[1]
        matches += len(ranked[0][1])

    def fields(e):  # type: ignore[no-untyped-def]
        return (e.kind, e.confidence, e.seen_at, e.use_count, e.evidence_count,
                [c.source for c in e.compiled], e.scenario, e.rest, e.trust, e.pinned,
                e.version, e.updated_at, e.filed, e.indexed, e.run_count)  # fmt: skip

    return {
        "cards": len(fresh.entries),
        "entries_differing": sum(
            fields(e) != fields(saved.entries[k]) if k in saved.entries else 1
            for k, e in fresh.entries.items()
        ),
        "stats_equal": fresh.stats.atoms == saved.stats.atoms,
        "states": n,
        "states_differing": differ,
        "matches_compared": matches,
    }


def _ensure_file(data: Path) -> dict:
    """Write the namespace's file after a full load when missing, as a server does: its first
    query starts the background ordering of its lists, and the file is written once they are
    ordered (saved with them); the write's cost."""
    from bench.scale_data import states
    from memory_core import db
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve
    from memory_core.serve.snapshot import load_snapshot
    from memory_core.serve.snapshot_restore import save
    from memory_core.settings import Settings

    if _files(data).path(NS).exists():
        return {}
    engine = db.make_engine(Settings(data_dir=data))
    snap = load_snapshot(engine=engine, namespace=NS)
    retrieve(snapshot=snap, state=states(1)[0]["task_state"], now=utcnow(), top_k=5)
    while snap.warming == "started":  # not timed: a server writes the file in the background
        time.sleep(0.1)
    t, c = time.perf_counter(), time.process_time()
    save(engine, _files(data), snap)
    return {
        "save_wall_s": round(time.perf_counter() - t, 2),
        "save_cpu_s": round(time.process_time() - c, 2),
        "orders_saved": len(snap.orders),
    }


def _use_some(data: Path, share: float) -> int:
    """Uses of a share of the cards, written after the file (as a server writes them)."""
    from sqlalchemy import select
    from sqlmodel import Session, col

    from memory_core import db
    from memory_core.models.card import Card
    from memory_core.serve.uses import UseRecorder
    from memory_core.settings import Settings

    engine = db.make_engine(Settings(data_dir=data))
    with Session(engine) as session:
        ids = [
            r[0]
            for r in session.execute(
                select(col(Card.card_id)).where(col(Card.namespace) == NS)
            ).all()
        ]
    used = ids[:: int(1 / share)]
    rec = UseRecorder(engine=engine)
    rec.record(namespace=NS, card_ids=used)
    rec.flush()
    return len(used)


def _run(data: Path, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(data), mode],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _median(runs: list[dict]) -> dict:
    keys = ("wall_s", "cpu_s", "rss_mb_after_load", "rss_mb_peak", "first_query_ms")
    return {k: statistics.median(r[k] for r in runs) for k in keys} | {
        "load_avg_1m": [r["load_avg_1m"] for r in runs]
    }


def main() -> None:
    """Alternate database and file loads per size; medians and raw runs to OUT_JSON."""
    out_path, runs = Path(sys.argv[1]), int(sys.argv[2])
    result: dict = {
        "what": "cold load of namespace 'bench' (bench/scale_data.seed) in a new "
        "process each run, from the database and from its snapshot file alternately; "
        "CPU = process_time of the load (both threads), first query = one retrieve right after; "
        "file_after_uses: 1% of the cards used after the file was written (their uses read again); "
        "save: writing the file after a full load (off the query path in a server)",
        "database": "postgresql" if os.environ.get("HINDSIGHT_DATABASE_URL") else "sqlite",
        "sizes": {},
    }
    for arg in sys.argv[3:]:
        size, data = arg.split("=", 1)
        save = _ensure_file(Path(data))
        raw: dict[str, list[dict]] = {"database": [], "file": [], "file_after_uses": []}
        for _ in range(runs):
            for mode in ("database", "file"):
                raw[mode].append(_run(Path(data), mode))
                print(size, mode, json.dumps(raw[mode][-1]), flush=True)
        used = _use_some(Path(data), 0.01)  # 1% of the cards used after the file was written
        for _ in range(runs):
            raw["file_after_uses"].append(_run(Path(data), "file"))
            print(size, "file_after_uses", json.dumps(raw["file_after_uses"][-1]), flush=True)
        result["sizes"][size] = {
            "cards": raw["file"][0]["cards"],
            "database": _median(raw["database"]),
            "file": _median(raw["file"]),
            "file_after_uses": _median(raw["file_after_uses"]) | {"cards_used_since": used},
            "save": save,
            "file_mb": round(_files(Path(data)).path(NS).stat().st_size / 2**20),
            "raw": raw,
        }
        out_path.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        print(json.dumps(one(Path(sys.argv[2]), sys.argv[3])))
    elif sys.argv[1] == "--compare":  # python bench/cold_file.py --compare DATA_DIR
        print(json.dumps(compare(Path(sys.argv[2]))))
    else:
        main()
