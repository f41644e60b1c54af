"""Consolidation of active cards with 20% near-duplicates: time at 5k..50k cards (it must grow
about linearly) and the precision of the merges against the known duplicate labels.

    python bench/consolidate.py [--sizes 5000 10000 25000 50000] [--repeats 3] [--backend sqlite]

Cards are seeded in bulk: lessons spread over 500 tools and two kinds of state (pre-call and
after-error); each duplicate repeats a lesson with other words and a nearby vector (cosine
about 0.95) and another literal in its preconditions, as a second run of the same agent
would; different lessons of one tool sit at cosine ~0.7 (hard negatives). Vectors are stored
the way the stage stores them, so the run embeds nothing (embedding itself: ~260 texts/s with
MiniLM on 2 cores).
Writes bench/results/consolidate_BACKEND.json and consolidate_BACKEND.png.
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

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
PG_ADMIN = os.environ.get(
    "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DIM = 384


def _seed(engine, n: int, rng: np.random.Generator) -> dict[uuid.UUID, int]:
    """n active cards, 20% of them near-duplicates; returns card -> lesson label."""
    from sqlalchemy import insert

    from memory_core.embed.base import embedding_text, text_hash
    from memory_core.embed.onnx import MODEL_NAME
    from memory_core.models.card import Card
    from memory_core.models.columns import utcnow
    from memory_core.models.embedding import CardEmbedding

    lessons = int(n * 0.8)
    # lessons of one block (same tool, same kind of state) share a direction: different lessons
    # there sit at cosine ~0.7, hard negatives for the 0.92 threshold
    blocks = rng.standard_normal((1000, DIM)).astype(np.float32)
    blocks /= np.linalg.norm(blocks, axis=1, keepdims=True)
    own = rng.standard_normal((lessons, DIM)).astype(np.float32)
    own /= np.linalg.norm(own, axis=1, keepdims=True)
    base = 0.84 * blocks[np.arange(lessons) % 1000] + 0.54 * own
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    labels, cards, vectors = {}, [], []
    now = utcnow()
    for i in range(n):
        lesson = i if i < lessons else int(rng.integers(lessons))
        dup = i >= lessons
        tool = f"tool_{lesson % 500}"
        # a duplicate words its state differently (another literal), so only similarity finds it
        variant = f" (seen {i})" if dup else ""
        if lesson % 2:
            pre = [f'tool == "{tool}"', f'task_type == "task {lesson}{variant}"']
            scenario = f"Calling {tool} can fail with error {lesson}"
        else:
            pre = [f'last_tool == "{tool}"', f'last_error == "error {lesson}{variant}"']
            scenario = f"After {tool} failed with error {lesson}, retry with other arguments"
        if dup:
            scenario = "Seen again: " + scenario.lower()
        vec = base[lesson] + (0.33 * rng.standard_normal(DIM) / np.sqrt(DIM) if dup else 0)
        vec = (vec / np.linalg.norm(vec)).astype(np.float32)
        row = {
            "card_id": uuid.uuid4(),
            "namespace": "bench",
            "kind": "experience",
            "scenario": scenario,
            "preconditions": pre,
            "action_sequence": [{"tool": tool, "params_template": {}, "note": ""}],
            "expected_outcome": "",
            "actual_outcome": "",
            "failure_modes": [
                {"mode": f"error {lesson}" + (" again" if dup else ""), "handling": ""}
            ],
            "confidence": 0.6,
            "status": "active",
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
        labels[row["card_id"]] = lesson
        cards.append(row)

        class _Text:  # what embedding_text reads
            scenario, key, query, value = row["scenario"], None, None, None
            action_sequence, failure_modes = row["action_sequence"], row["failure_modes"]

        vectors.append(
            {
                "card_id": row["card_id"],
                "model": MODEL_NAME,
                "text_hash": text_hash(embedding_text(_Text)),
                "dim": DIM,
                "vector": vec.tobytes(),
                "created_at": now,
            }
        )
    with engine.begin() as conn:
        for i in range(0, n, 10_000):
            conn.execute(insert(Card), cards[i : i + 10_000])
            conn.execute(insert(CardEmbedding), vectors[i : i + 10_000])
    return labels


def measure(backend: str, n: int) -> dict:
    """One fresh database, n cards, one consolidation; time, merges and their precision."""
    import psycopg
    from sqlalchemy import select
    from sqlmodel import Session, col

    from memory_core import db
    from memory_core.consolidate.stage import consolidate
    from memory_core.embed.onnx import OnnxMiniLM
    from memory_core.models.card import Card
    from memory_core.settings import Settings

    data = Path(tempfile.mkdtemp(prefix="hindsight-consolidate-bench-"))
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
        labels = _seed(engine, n, np.random.default_rng(n))
        start = time.perf_counter()
        report = consolidate(
            engine=engine, namespace="bench", rules=settings.consolidate, embedder=OnnxMiniLM()
        )
        seconds = time.perf_counter() - start
        with Session(engine) as s:
            merged = s.execute(
                select(col(Card.card_id), col(Card.superseded_by)).where(
                    col(Card.status) == "superseded"
                )
            ).all()
        right = sum(labels[a] == labels[b] for a, b in merged)
        duplicates = n - len(set(labels.values()))
        engine.dispose()
        return {
            "backend": backend,
            "cards": n,
            "seconds": seconds,
            "merged_away": len(merged),
            "true_duplicates": duplicates,
            "precision": right / len(merged) if merged else 1.0,
            "recall": right / duplicates if duplicates else 1.0,
            "embedded": report.embedded,
        }
    finally:
        if pg_name:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 25000, 50000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    args = ap.parse_args()
    results = []
    for n in args.sizes:
        runs = [measure(args.backend, n) for _ in range(args.repeats)]
        med = statistics.median(r["seconds"] for r in runs)
        results.append({**runs[0], "seconds": [r["seconds"] for r in runs], "median_s": med})
        r = runs[0]
        print(
            f"{args.backend} {n:>6} cards: {med:6.2f} s (median of {args.repeats}), "
            f"{r['merged_away']} merged away of {r['true_duplicates']} duplicates, "
            f"precision {r['precision']:.3f}, recall {r['recall']:.3f}, embedded {r['embedded']}"
        )
    per_card = [r["median_s"] / r["cards"] * 1000 for r in results]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "target_s_at_50k": 60,
        "backend": args.backend,
        "results": results,
        "ms_per_card": per_card,
    }
    (RESULTS / f"consolidate_{args.backend}.json").write_text(json.dumps(out, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [r["cards"] for r in results]
    ax.plot(xs, [r["median_s"] for r in results], "o-", label="measured (median)")
    ax.plot(
        xs, [results[0]["median_s"] * x / xs[0] for x in xs], ":", label="linear from the first"
    )
    ax.axhline(60, color="red", ls=":", label="target at 50k: 60 s")
    ax.set(
        xlabel="active cards (20% near-duplicates)",
        ylabel="seconds",
        title=f"consolidation, {args.backend}",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"consolidate_{args.backend}.png", dpi=110)


if __name__ == "__main__":
    main()
