"""Batch stages under live traffic: decay and consolidate over 30k cards on PostgreSQL while
16 connections send queries and outcome feedback to `hindsight serve` over HTTP.

Each run resets the cards to one seed (bench.decay.reset), starts the load, runs decay then
consolidate (memory_core, as the nightly's tasks call them), stops the load, and checks that
every feedback the API acknowledged is in the database (the use's outcome, its history row,
and the card's counters). An idle run (no load) gives the stage's time to compare with.
Prints a table, writes bench/results/chaos_live.json.

    python bench/chaos_live.py [--cards 30000] [--runs 10] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.decay import COLUMNS, PG_ADMIN, RESULTS, _seed_table, reset  # noqa: E402
from bench.retrieval_data import query_states, seed  # noqa: E402

NAMESPACE = "bench"


def _seed(engine: Any, n: int) -> None:
    """The retrieval benchmark's cards (queries match them), idle 0-120 days, and a copy to
    reset from: about a quarter fade, a quarter go to the archive, some near-duplicates."""
    from sqlalchemy import text

    seed(engine, n, NAMESPACE)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE card SET last_used_at = NULL, created_at = now() "
                "- mod(abs(hashtext(card_id::text)::bigint), 120) * INTERVAL '1 day'"
            )
        )
        conn.execute(text("UPDATE card SET updated_at = created_at"))
        _seed_table(conn)
        conn.execute(text(f"INSERT INTO card_seed ({COLUMNS}) SELECT {COLUMNS} FROM card"))


class Load:
    """16 (concurrency) clients: query, then report an outcome for the first card served."""

    def __init__(self, url: str, key: str, states: list[dict], concurrency: int) -> None:
        self.url, self.key, self.states, self.concurrency = url, key, states, concurrency
        self.acked: list[tuple[str, str, str]] = []  # (card, use, outcome) the API accepted
        self.queries = 0
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    async def _run(self) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.key}"}
        limits = httpx.Limits(max_connections=self.concurrency)
        async with httpx.AsyncClient(
            base_url=self.url, headers=headers, limits=limits, timeout=60
        ) as c:
            await asyncio.gather(*(self._worker(c, w) for w in range(self.concurrency)))

    async def _worker(self, c: Any, w: int) -> None:
        import httpx

        rnd, i = random.Random(w), w
        while not self._stop.is_set():
            state = self.states[i % len(self.states)]
            i += self.concurrency
            try:
                r = await c.post("/v1/cards/query", json={"task_state": state, "top_k": 3})
                self.queries += 1
                if r.status_code != 200:
                    self.errors[f"query {r.status_code}: {r.text[:120]}"] += 1
                    continue
                hits = r.json()["cards"]
                if not hits:
                    continue
                hit = hits[0]
                card, use = hit["card"]["card_id"], hit["use_id"]
                outcome = "success" if rnd.random() < 0.7 else "failure"
                f = await c.post(
                    f"/v1/cards/{card}/feedback", json={"outcome": outcome, "use_id": use}
                )
                if f.status_code == 200:
                    self.acked.append((card, use, outcome))
                else:
                    self.errors[f"feedback {f.status_code}: {f.text[:120]}"] += 1
            except httpx.HTTPError as exc:
                self.errors[f"{type(exc).__name__}: {exc}"[:160]] += 1


def _lost(engine: Any, acked: list[tuple[str, str, str]]) -> dict[str, int]:
    """Acknowledged feedback missing from the database: the use without its outcome, no
    history row for it, or a card counting fewer outcomes than were acknowledged for it."""
    from sqlalchemy import text

    with engine.connect() as conn:
        outcomes: dict[str, str] = {
            str(u): str(o)
            for u, o in conn.execute(
                text("SELECT id::text, outcome FROM card_use WHERE outcome IS NOT NULL")
            )
        }
        history = set(
            conn.execute(
                text("SELECT snapshot->>'use_id' FROM card_version WHERE snapshot ? 'use_id'")
            ).scalars()
        )
        counts = {
            cid: (s, f)
            for cid, s, f, status in conn.execute(
                text(
                    "SELECT card_id::text, success_count, failure_count, status FROM card "
                    "WHERE namespace = :ns"
                ),
                {"ns": NAMESPACE},
            )
            if status != "superseded"  # its counts moved to the card it merged into
        }
    want: dict[str, list[int]] = {}
    for card, _, outcome in acked:
        want.setdefault(card, [0, 0])[outcome == "failure"] += 1
    return {
        "use_outcome": sum(outcomes.get(use) != outcome for _, use, outcome in acked),
        "history": sum(use not in history for _, use, _ in acked),
        "counters": sum(
            1
            for card, (s, f) in want.items()
            if card in counts and (counts[card][0] < s or counts[card][1] < f)
        ),
    }


def _stage(engine: Any, cap: int) -> dict[str, Any]:
    from memory_core.consolidate.stage import consolidate
    from memory_core.decay import DecayParams, run_decay
    from memory_core.settings import ConsolidateRules, RankingWeights

    t0 = time.perf_counter()
    report = run_decay(engine=engine, params=DecayParams(cap=cap), weights=RankingWeights())
    t1 = time.perf_counter()
    merged = consolidate(engine=engine, namespace=NAMESPACE, rules=ConsolidateRules())
    t2 = time.perf_counter()
    return {
        "decay_s": round(t1 - t0, 2),
        "consolidate_s": round(t2 - t1, 2),
        "stage_s": round(t2 - t0, 2),
        "decay_counts": report.counts,
        "decay_skipped": getattr(report, "skipped", None),
        "merges": merged.merges,
        "consolidate_deferred": getattr(merged, "deferred", None),
    }


def _one_run(engine: Any, load: Load | None, cap: int, warmup_s: float) -> dict[str, Any]:
    reset(engine)
    if load is not None:
        load.start()
        time.sleep(warmup_s)  # traffic before the stage starts, and during all of it
    out: dict[str, Any] = {"finished": False}
    try:
        out.update(_stage(engine, cap))
        out["finished"] = True
    except Exception as exc:  # a failed run is a result to report, not the end of the bench
        out["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        traceback.print_exc()
    finally:
        if load is not None:
            time.sleep(1.0)  # still loaded right after the stage
            load.stop()
    if load is not None:
        time.sleep(1.5)  # the server's use writer flushes every 0.25 s
        out["queries"] = load.queries
        out["feedback_acked"] = len(load.acked)
        out["api_errors"] = sum(load.errors.values())
        out["api_error_kinds"] = dict(load.errors.most_common(5))
        out["lost"] = _lost(engine, load.acked)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cards", type=int, default=30_000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--cap", type=int, default=50_000, help="above the card count: no cap")
    ap.add_argument("--out", default=str(RESULTS / "chaos_live.json"))
    args = ap.parse_args()

    import httpx
    import psycopg

    from memory_core import db
    from memory_core.serve.keys import create_key
    from memory_core.settings import Settings

    pg_name = f"hindsight_chaos_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{pg_name}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{pg_name}"
    tmp = Path(tempfile.mkdtemp(prefix="hs-chaos-live-"))  # removed at the end, on error too
    proc = None
    try:
        settings = Settings(data_dir=tmp, database_url=url)
        db.upgrade(settings)
        engine = db.make_engine(settings)
        t = time.perf_counter()
        _seed(engine, args.cards)
        print(f"seeded {args.cards} cards in {time.perf_counter() - t:.1f} s", flush=True)
        key = create_key(engine=engine, namespace=NAMESPACE, scopes=["read"])[1]

        idle = _one_run(engine, None, args.cap, 0)
        print("idle:", json.dumps(idle), flush=True)

        port = 18800 + random.randrange(90)
        env = {
            "HINDSIGHT_DATA_DIR": str(tmp),
            "HINDSIGHT_DATABASE_URL": url,
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
        }
        exe = Path(sys.executable).parent / "hindsight"
        proc = subprocess.Popen(
            [str(exe), "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp / "serve.log", "wb"),  # noqa: SIM115
        )
        base = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        states = query_states(5000, args.cards)
        runs = []
        for i in range(args.runs):
            load = Load(base, key, states, args.concurrency)
            r = _one_run(engine, load, args.cap, args.warmup)
            runs.append(r)
            print(f"run {i + 1}:", json.dumps(r), flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
        shutil.rmtree(tmp, ignore_errors=True)

    done = [r for r in runs if r["finished"]]
    lost = sum(sum(r["lost"].values()) for r in runs)
    out = {
        "backend": "postgresql",
        "cards": args.cards,
        "concurrency": args.concurrency,
        "runs": len(runs),
        "runs_finished": len(done),
        "feedback_acked": sum(r["feedback_acked"] for r in runs),
        "feedback_lost": lost,
        "api_errors": sum(r["api_errors"] for r in runs),
        "queries": sum(r["queries"] for r in runs),
        "idle_stage_s": idle.get("stage_s"),
        "live_stage_median_s": statistics.median(r["stage_s"] for r in done) if done else None,
        "idle": idle,
        "detail": runs,
    }
    print(
        f"\nruns finished {len(done)}/{len(runs)}  feedback acked {out['feedback_acked']}  "
        f"lost {lost}  API errors {out['api_errors']}  queries {out['queries']}\n"
        f"stage (decay + consolidate): idle {out['idle_stage_s']} s, "
        f"under load median {out['live_stage_median_s']} s",
        flush=True,
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
