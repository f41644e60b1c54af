"""The decay stage (time decay, unused archive, cap; history and archive rows) over
1,000,000 cards on PostgreSQL and 100,000 on SQLite, with a frozen clock.

    python bench/decay.py [--pg-cards 1000000] [--sqlite-cards 100000] [--repeats 3]
                          [--per-namespace 10000] [--backends postgresql sqlite]

Cards are seeded with SQL (generate_series / a recursive CTE), idle 0-150 days, a third
never used, confidences 0.2-1.0, 5 % not active, 10,000 per namespace (cap 5,000), so every
rule fires. Each repeat starts from the same seed: the first run works off that backlog
(about three quarters of the cards change), then "the next night" (clock + 1 day) measures
the steady state. Medians of the repeats. Writes bench/results/decay.json and decay.png.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
PG_ADMIN = os.environ.get(
    "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
NOW = datetime(2026, 6, 1, tzinfo=UTC)
TARGET_S = 30.0
COLUMNS = (
    "card_id, namespace, kind, scenario, preconditions, action_sequence, expected_outcome, "
    "actual_outcome, failure_modes, confidence, status, signature, provenance, evidence_count, "
    "created_at, updated_at, last_used_at, use_count, success_count, failure_count, "
    "consecutive_failures, version, decay_tier, served_outcomes, served_successes, "
    "withheld_outcomes, withheld_successes"
)
# outcomes per holdout arm (memory_core.effects): 2% of the cards measured harmful, 2% with no
# effect, 2% helpful; the rest without a verdict (served, withheld, and their successes)
_ARMS = {1: (200, 80, 40, 28), 2: (3000, 1500, 3000, 1500), 3: (200, 160, 40, 12)}


def _arm(g: str, i: int) -> str:
    whens = " ".join(f"WHEN {g} % 50 = {k} THEN {v[i]}" for k, v in _ARMS.items())
    return f"CASE {whens} ELSE 0 END"


def _values(g: str, per_ns: int, uuid_sql: str, idle_ts, json_empty: str, json_obj: str) -> str:
    """The SELECT list of one seeded card from the integer g (same shape on both backends)."""
    idle = f"(({g} * 7919) % 3600) / 24.0"  # 0-150 days, spread by a prime stride
    used = f"CASE WHEN {g} % 3 = 0 THEN NULL ELSE {idle_ts(idle)} END"
    return f"""
        {uuid_sql}, 'ns' || ({g} / {per_ns}), 'experience', 'seeded card ' || {g},
        {json_empty}, {json_empty}, 'ok', 'ok', {json_empty},
        0.2 + (({g} * 104729) % 800) / 1000.0,
        CASE WHEN {g} % 20 = 0 THEN 'review' ELSE 'active' END,
        'sig' || {g}, {json_obj}, 1 + {g} % 5,
        {idle_ts(f"({idle}) + 10")}, {idle_ts(f"({idle}) + 10")}, {used},
        ({g} * 13) % 50, 0, 0, 0, 1,
        CASE WHEN {g} % 7 = 0 AND (({g} * 7919) % 3600) / 24.0 >= 30 THEN 1 ELSE 0 END,
        {_arm(g, 0)}, {_arm(g, 1)}, {_arm(g, 2)}, {_arm(g, 3)}
    """


def _seed_table(conn) -> None:
    """A plain copy of the card table's columns, to reset from between repeats."""
    from sqlalchemy import text

    conn.execute(text("DROP TABLE IF EXISTS card_seed"))
    conn.execute(text("CREATE TABLE card_seed AS SELECT * FROM card WHERE 1 = 0"))


def seed_postgresql(engine, n: int, per_ns: int) -> None:
    from sqlalchemy import text

    def idle_ts(days: str) -> str:
        return f"(TIMESTAMPTZ '{NOW.isoformat()}' - ({days}) * INTERVAL '1 day')"

    select = _values("g", per_ns, "md5('card' || g)::uuid", idle_ts, "'[]'::jsonb", "'{}'::jsonb")
    with engine.begin() as conn:
        _seed_table(conn)
        conn.execute(
            text(
                f"INSERT INTO card_seed ({COLUMNS}) SELECT {select} "
                "FROM generate_series(1::bigint, :n) AS g"
            ).bindparams(n=n)
        )


def seed_sqlite(engine, n: int, per_ns: int) -> None:
    from sqlalchemy import text

    def idle_ts(days: str) -> str:
        # the text form SQLAlchemy stores: 'YYYY-MM-DD HH:MM:SS.ffffff'
        return (
            f"(strftime('%Y-%m-%d %H:%M:%S', julianday('{NOW:%Y-%m-%d %H:%M:%S}') - ({days}))"
            " || '.000000')"
        )

    select = _values("g", per_ns, "lower(hex(randomblob(16)))", idle_ts, "'[]'", "'{}'")
    with engine.begin() as conn:
        _seed_table(conn)
        conn.execute(
            text(
                f"INSERT INTO card_seed ({COLUMNS}) WITH RECURSIVE seq(g) AS "
                "(SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < :n) "
                f"SELECT {select} FROM seq"
            ).bindparams(n=n)
        )


def reset(engine) -> None:
    """Back to the seed: no history, no archive, every card as seeded."""
    from sqlalchemy import text

    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("TRUNCATE card_version, card_archive, card_use, card CASCADE"))
        else:
            for table in ("card_version", "card_archive", "card_use", "card"):
                conn.execute(text(f"DELETE FROM {table}"))
        conn.execute(text(f"INSERT INTO card ({COLUMNS}) SELECT {COLUMNS} FROM card_seed"))
    with engine.connect() as conn:
        auto = conn.execution_options(isolation_level="AUTOCOMMIT")
        if engine.dialect.name == "postgresql":
            auto.execute(text("VACUUM ANALYZE card"))
            auto.execute(text("CHECKPOINT"))  # the seed's dirty pages are not the stage's cost
        else:
            auto.execute(text("ANALYZE"))


def measure(backend: str, n: int, per_ns: int, repeats: int) -> dict:
    """Median seconds of the decay stage over n cards (a dry run timed once as well)."""
    import psycopg

    from memory_core import db
    from memory_core.decay import DecayParams, run_decay
    from memory_core.settings import RankingWeights, Settings

    data = Path(tempfile.mkdtemp(prefix="hindsight-decay-bench-"))
    pg_name = None
    url = None
    if backend == "postgresql":
        pg_name = f"hindsight_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{pg_name}"')
        url = PG_ADMIN.rsplit("/", 1)[0] + f"/{pg_name}"
    try:
        settings = Settings(data_dir=data, database_url=url)
        db.upgrade(settings)
        engine = db.make_engine(settings)
        start = time.perf_counter()
        (seed_postgresql if backend == "postgresql" else seed_sqlite)(engine, n, per_ns)
        print(f"{backend}: seeded {n} cards in {time.perf_counter() - start:.1f} s")
        params = DecayParams(now=NOW, cap=5000)
        reset(engine)
        start = time.perf_counter()
        plan = run_decay(
            engine=engine,
            params=params.model_copy(update={"dry_run": True}),
            weights=RankingWeights(),
            list_limit=0,
        )
        dry_s = time.perf_counter() - start
        print(f"{backend}: dry run {dry_s:.2f} s, plan {plan.counts}")
        assert all(plan.counts.values()), plan.counts  # every rule fires
        times, nightly, nightly_counts = [], [], {}
        next_night = params.model_copy(update={"now": NOW + timedelta(days=1)})
        for _ in range(repeats):
            reset(engine)
            start = time.perf_counter()
            report = run_decay(engine=engine, params=params, weights=RankingWeights())
            times.append(time.perf_counter() - start)
            assert report.counts == plan.counts, (report.counts, plan.counts)
            print(f"{backend}: first run {times[-1]:.2f} s {report.counts}")
            # the steady state: the next night only cards crossing a threshold change
            start = time.perf_counter()
            nightly_counts = run_decay(
                engine=engine, params=next_night, weights=RankingWeights()
            ).counts
            nightly.append(time.perf_counter() - start)
            print(f"{backend}: next night {nightly[-1]:.2f} s {nightly_counts}")
        engine.dispose()
        return {
            "backend": backend,
            "cards": n,
            "namespaces": -(-n // per_ns),
            "changes": plan.counts,
            "dry_run_s": dry_s,
            "seconds": times,
            "median_s": statistics.median(times),
            "next_night_changes": nightly_counts,
            "next_night_seconds": nightly,
            "next_night_median_s": statistics.median(nightly),
        }
    finally:
        if pg_name:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pg-cards", type=int, default=1_000_000)
    ap.add_argument("--sqlite-cards", type=int, default=100_000)
    ap.add_argument("--per-namespace", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", nargs="+", default=["postgresql", "sqlite"])
    args = ap.parse_args()
    sizes = {"postgresql": args.pg_cards, "sqlite": args.sqlite_cards}
    results = [measure(b, sizes[b], args.per_namespace, args.repeats) for b in args.backends]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "decay.json").write_text(
        json.dumps({"target_s": {"postgresql": TARGET_S}, "results": results}, indent=2)
    )
    for r in results:
        print(
            f"{r['backend']}: decay stage over {r['cards']:,} cards: first run "
            f"{r['median_s']:.2f} s (median of {len(r['seconds'])}; changes {r['changes']}), "
            f"next night {r['next_night_median_s']:.2f} s ({r['next_night_changes']}), "
            f"dry run {r['dry_run_s']:.2f} s"
            + ("; target < 30 s" if r["backend"] == "postgresql" else "")
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    labels = [f"{r['backend']}\n{r['cards']:,} cards" for r in results]
    x = range(len(results))
    ax.bar([i - 0.2 for i in x], [r["median_s"] for r in results], 0.4, label="first run")
    ax.bar(
        [i + 0.2 for i in x], [r["next_night_median_s"] for r in results], 0.4, label="next night"
    )
    ax.scatter(x, [r["dry_run_s"] for r in results], color="black", zorder=3, label="dry run")
    ax.set_xticks(list(x), labels)
    ax.axhline(TARGET_S, color="red", ls=":", label="PostgreSQL target 30 s")
    ax.set(ylabel="seconds", title="decay stage (history + archive rows included)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "decay.png", dpi=110)


if __name__ == "__main__":
    main()
