"""Export and import of one namespace of 100,000 cards (each with a version), SQLite to
PostgreSQL and back, through a JSON Lines file.

    python bench/namespace_io.py [--cards 100000]

Seeds a fresh SQLite store, then times (wall, and this process's CPU): export from SQLite,
import into a fresh PostgreSQL database, export from PostgreSQL (the file must be
byte-identical to the first), import into a fresh SQLite store. Target: each way under 60 s
(wall). Writes bench/results/namespace_io.json, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
PG_ADMIN = os.environ.get(
    "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
TARGET_S = 60.0
NS = "bench-io"


def seed(engine, n: int) -> None:
    """n cards (a tenth of them facts with a validity end), one version each."""
    from sqlalchemy import insert

    from memory_core.models import Card, CardVersion

    start = datetime(2026, 1, 1, tzinfo=UTC)
    for lo in range(0, n, 5000):
        cards, versions = [], []
        for i in range(lo, min(n, lo + 5000)):
            cid, at = uuid.uuid4(), start + timedelta(seconds=i)
            fact = i % 10 == 0
            cards.append(
                {
                    "card_id": cid,
                    "namespace": NS,
                    "kind": "fact" if fact else "experience",
                    "scenario": f"when call {i} answers 429, back off and retry",
                    "preconditions": [f'last_tool == "t{i % 97}"', "error_count > 0"],
                    "action_sequence": [{"tool": f"t{i % 97}", "params_template": {"page": 10}}],
                    "failure_modes": [{"mode": "rate limited", "handling": "wait 2 s"}],
                    "confidence": 0.5 + (i % 50) / 100,
                    "status": "active",
                    "signature": f"sig{i}",
                    "provenance": {"producer": "bench", "run": i % 7},
                    "key": f"user{i}.city" if fact else None,
                    "value": "Oslo" if fact else None,
                    "valid_until": at + timedelta(days=365) if fact else None,
                    "created_at": at,
                    "updated_at": at,
                }
            )
            versions.append(
                {
                    "id": uuid.uuid4(),
                    "card_id": cid,
                    "version": 1,
                    "snapshot": {"scenario": cards[-1]["scenario"]},
                    "reason": "stored",
                    "actor": "bench",
                    "created_at": at,
                }
            )
        with engine.begin() as conn:
            conn.execute(insert(Card), cards)
            conn.execute(insert(CardVersion), versions)


def _export(engine, path: Path) -> tuple[float, float]:
    """Wall and this process's CPU seconds of one export."""
    from memory_core.namespaces.export import export_namespace

    t, cpu = time.perf_counter(), time.process_time()
    with path.open("wb") as f:
        export_namespace(engine=engine, namespace=NS, write=f.write)
    return time.perf_counter() - t, time.process_time() - cpu


def _import(engine, path: Path) -> tuple[float, float]:
    """Wall and this process's CPU seconds of one import."""
    from memory_core.namespaces.importer import import_namespace

    t, cpu = time.perf_counter(), time.process_time()
    with path.open("rb") as f:
        out = import_namespace(engine=engine, lines=f)
    assert out.added["card"] == out.read["card"], out
    return time.perf_counter() - t, time.process_time() - cpu


def main() -> None:
    """Run it and write the results."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cards", type=int, default=100_000)
    args = ap.parse_args()
    import psycopg

    from memory_core import db
    from memory_core.settings import Settings

    load = os.getloadavg()
    name = f"hindsight_bench_io_{uuid.uuid4().hex[:8]}"
    admin = PG_ADMIN.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    # both stores and the dumps (~575 MB at 100k cards): removed on error and Ctrl-C too
    tmp = Path(tempfile.mkdtemp(prefix="namespace-io-"))
    engines = []
    try:
        lite_s, back_s = Settings(data_dir=tmp / "a"), Settings(data_dir=tmp / "b")
        pg_s = Settings(data_dir=tmp / "pg", database_url=f"{admin.rsplit('/', 1)[0]}/{name}")
        for s in (lite_s, back_s, pg_s):
            db.upgrade(s)
            engines.append(db.make_engine(s))
        lite, back, pg = engines
        t = time.perf_counter()
        seed(lite, args.cards)
        seeded = time.perf_counter() - t
        first, second, third = tmp / "1.jsonl", tmp / "2.jsonl", tmp / "3.jsonl"
        measured = {
            "export_sqlite": _export(lite, first),
            "import_postgresql": _import(pg, first),
            "export_postgresql": _export(pg, second),
            "import_sqlite": _import(back, second),
        }
        times = {f"{k}_s": wall for k, (wall, _) in measured.items()}
        cpu = {f"{k}_cpu_s": c for k, (_, c) in measured.items()}
        _export(back, third)
        identical = first.read_bytes() == second.read_bytes() == third.read_bytes()
        result = {
            "cards": args.cards,
            "lines": sum(1 for _ in first.open("rb")),
            "file_mb": round(first.stat().st_size / 1e6, 1),
            "seed_s": round(seeded, 1),
            **{k: round(v, 2) for k, v in times.items()},
            # this process's CPU (the database server's own is not in it): on a machine
            # loaded by others the wall time is mostly waiting for a core
            **{k: round(v, 2) for k, v in cpu.items()},
            "dumps_identical": identical,
            "target_s": TARGET_S,
            "met": identical and max(times.values()) < TARGET_S,
            "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(),
        }
    finally:
        for e in engines:
            e.dispose()
        shutil.rmtree(tmp)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "namespace_io.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
