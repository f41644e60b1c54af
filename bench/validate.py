"""Validation of 100,000 draft cards inside the validate flow (Great Expectations suite, status
updates, validation record, Data Docs), on SQLite and PostgreSQL. Prefect start-up excluded.

    python bench/validate.py [--cards 100000] [--repeats 3] [--backends sqlite postgresql]

Writes bench/results/validate.json and validate.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
PG_ADMIN = os.environ.get(
    "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _rows(n: int) -> list[dict]:
    # 500 tools x 997 errors (coprime): every card has its own precondition list, as after
    # dedup by signature; single expressions repeat, as they do in real runs
    from memory_core.models.columns import utcnow

    now = utcnow()
    return [
        {
            "card_id": uuid.uuid4(),
            "namespace": "default",
            "kind": "experience",
            "scenario": f"When call {i % 500} fails with error {i % 997}",
            "preconditions": [f'tool == "tool_{i % 500}"', f'last_error_code == "{i % 997}"'],
            "action_sequence": [
                {
                    "tool": f"tool_{i % 500}",
                    "params_template": {"a": "<s>"},
                    "note": "retry with a smaller page",
                }
            ],
            "expected_outcome": "the call succeeds",
            "actual_outcome": "recovered",
            "failure_modes": [{"mode": "http 429", "handling": "back off"}],
            "confidence": 0.3 if i % 10 == 0 else 0.7,
            "status": "draft",
            "signature": uuid.uuid4().hex,
            "provenance": {},
            "evidence_count": 1,
            "created_at": now,
            "updated_at": now,
            "use_count": 0,
            "success_count": 0,
            "failure_count": 0,
            "consecutive_failures": 0,
            "version": 1,
        }
        for i in range(n)
    ]


def measure(backend: str, n: int, repeats: int) -> dict:
    """Median seconds of the validate flow over n drafts (reset to draft between repeats)."""
    import psycopg
    from sqlalchemy import insert, update
    from sqlmodel import Session

    from flows.validate import ValidateParams, validate
    from memory_core import db
    from memory_core.models.card import Card
    from memory_core.settings import Settings

    data = Path(tempfile.mkdtemp(prefix="hindsight-validate-bench-"))
    os.environ["HINDSIGHT_DATA_DIR"] = str(data)
    pg_name = None
    if backend == "postgresql":
        pg_name = f"hindsight_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{pg_name}"')
        os.environ["HINDSIGHT_DATABASE_URL"] = PG_ADMIN.rsplit("/", 1)[0] + f"/{pg_name}"
    else:
        os.environ.pop("HINDSIGHT_DATABASE_URL", None)
    try:
        settings = Settings()
        db.upgrade(settings)
        engine = db.make_engine(settings)
        rows = _rows(n)
        with Session(engine) as s:
            for i in range(0, n, 20_000):
                s.execute(insert(Card), rows[i : i + 20_000])
            s.commit()
        times = []
        for _ in range(repeats):
            with Session(engine) as s:
                s.execute(update(Card).values(status="draft"))
                s.commit()
            start = time.perf_counter()
            summary = validate(ValidateParams())
            times.append(time.perf_counter() - start)
            assert summary.evaluated == n and summary.review == n // 10, summary
            print(f"{backend}: {times[-1]:.2f} s")
        engine.dispose()
        return {
            "backend": backend,
            "cards": n,
            "seconds": times,
            "median_s": statistics.median(times),
        }
    finally:
        if pg_name:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cards", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        from flows.validate import ValidateParams, validate

        validate(ValidateParams())  # warm-up: Prefect start-up and the GX import
        results = [measure(b, args.cards, args.repeats) for b in args.backends]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "validate.json").write_text(
        json.dumps({"target_s": 10, "results": results}, indent=2)
    )
    for r in results:
        print(
            f"{r['backend']}: {r['cards']} cards validated in {r['median_s']:.2f} s "
            f"(median of {len(r['seconds'])}; target < 10 s)"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar([r["backend"] for r in results], [r["median_s"] for r in results])
    ax.axhline(10, color="red", ls=":", label="target 10 s")
    ax.set(ylabel="seconds (median)", title=f"validate flow, {args.cards} drafts")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "validate.png", dpi=110)


if __name__ == "__main__":
    main()
