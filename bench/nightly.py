"""Ingest + retrospect throughput with the rule extractor, on SQLite and PostgreSQL.

The tau-bench airline runs are replicated (each copy with its own id) to each size; every
(backend, size, repeat) runs in a fresh process on a fresh database, so peak memory is its own.
Prints a table, writes bench/results/nightly.json and bench/results/nightly.png.

    python bench/nightly.py [--sizes 1000 2500 5000] [--repeats 3] [--backends sqlite postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
PG_ADMIN = os.environ.get(
    "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


class PeakRSS:
    """Samples this process's resident memory every 5 ms; peak in MiB."""

    def __init__(self) -> None:
        import psutil

        self.proc, self.peak, self._stop = psutil.Process(), 0, threading.Event()

    def __enter__(self) -> PeakRSS:
        self.base = self.proc.memory_info().rss
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.base) / 2**20


def one(backend: str, size: int) -> dict[str, float]:
    """Measure one (backend, size) in this process; returns the numbers."""
    import psycopg

    from memory_core import db
    from memory_core.ingest.store import ingest
    from memory_core.retrospect.claims import worker_id
    from memory_core.retrospect.rule_extractor import RuleExtractor
    from memory_core.retrospect.stage import retrospect_once
    from memory_core.retrospect.summary import BatchResult
    from memory_core.settings import Settings
    from tests.helpers.data import replicate, tau_runs

    records = [(f"r{i}", r) for i, r in enumerate(replicate(tau_runs(), size))]
    tmp = Path(tempfile.mkdtemp(prefix="hindsight-bench-"))  # removed at the end, on error too
    pg_name = None
    if backend == "postgresql":
        pg_name = f"hindsight_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{pg_name}"')
        settings = Settings(data_dir=tmp, database_url=PG_ADMIN.rsplit("/", 1)[0] + f"/{pg_name}")
    else:
        settings = Settings(data_dir=tmp)
    try:
        db.upgrade(settings)
        engine = db.make_engine(settings)
        t0 = time.perf_counter()
        report = ingest(
            engine=engine, records=iter(records), namespace="default", task_type="default"
        )
        ingest_s = time.perf_counter() - t0
        assert report.stored == size, report
        extractor, worker, total = RuleExtractor(), worker_id(), BatchResult()
        with PeakRSS() as rss:
            t0 = time.perf_counter()
            while True:
                b = retrospect_once(
                    engine=engine,
                    extractor=extractor,
                    worker=worker,
                    batch_size=settings.retrospect.batch_size,
                    lease=timedelta(seconds=settings.retrospect.lease_seconds),
                )
                if not b.claimed:
                    break
                total.add(b)
            retro_s = time.perf_counter() - t0
        assert total.done == size, total
        engine.dispose()
        return {
            "ingest_s": ingest_s,
            "ingest_per_s": size / ingest_s,
            "retrospect_s": retro_s,
            "retrospect_per_s": size / retro_s,
            "rss_growth_mib": rss.growth_mib,
            "cards": total.cards_created,
            "evidence": total.evidence_added,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if pg_name:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


def plot(results: list[dict], path: Path) -> None:
    """Throughput and memory growth against the number of trajectories."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for backend in sorted({r["backend"] for r in results}):
        rows = sorted((r for r in results if r["backend"] == backend), key=lambda r: r["size"])
        sizes = [r["size"] for r in rows]
        a.plot(sizes, [r["retrospect_per_s"] for r in rows], "o-", label=f"retrospect {backend}")
        a.plot(sizes, [r["ingest_per_s"] for r in rows], "s--", label=f"ingest {backend}")
        b.plot(sizes, [r["rss_growth_mib"] for r in rows], "o-", label=backend)
    a.axhline(200, color="grey", lw=0.8, ls=":", label="target 200/s")
    a.set(xlabel="trajectories", ylabel="trajectories / s (median)", title="throughput")
    b.set(xlabel="trajectories", ylabel="MiB", title="peak RSS growth during retrospect")
    a.legend(fontsize=8)
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2500, 5000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    ap.add_argument("--one", nargs=2, metavar=("BACKEND", "SIZE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]))))
        return
    from rich.console import Console
    from rich.progress import track
    from rich.table import Table

    runs = [(b, s, k) for b in args.backends for s in args.sizes for k in range(args.repeats)]
    raw: dict[tuple[str, int], list[dict]] = {}
    for backend, size, _ in track(runs, description="benchmarking"):
        out = subprocess.run(
            [sys.executable, __file__, "--one", backend, str(size)],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        )
        raw.setdefault((backend, size), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    results = []
    for (backend, size), reps in raw.items():
        med = {k: statistics.median(r[k] for r in reps) for k in reps[0]}
        results.append(
            {"backend": backend, "size": size, "repeats": len(reps), **med, "runs": reps}
        )
    table = Table(title="ingest + retrospect (rule extractor), medians")
    for col in (
        "backend",
        "trajectories",
        "ingest/s",
        "retrospect/s",
        "retrospect s",
        "RSS growth MiB",
        "cards",
    ):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            r["backend"],
            str(r["size"]),
            f"{r['ingest_per_s']:.0f}",
            f"{r['retrospect_per_s']:.0f}",
            f"{r['retrospect_s']:.2f}",
            f"{r['rss_growth_mib']:.1f}",
            f"{r['cards']:.0f}",
        )
    Console().print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (RESULTS / "nightly.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    plot(results, RESULTS / "nightly.png")
    print(f"wrote {RESULTS / 'nightly.json'} and {RESULTS / 'nightly.png'}")


if __name__ == "__main__":
    main()
