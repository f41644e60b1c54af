"""The batch stages on several worker processes, on PostgreSQL: a backlog of trajectories (the
tau-bench airline runs replicated with new ids, spread over 20 namespaces) retrospected by
1 process, then by 2 at once claiming batches (memory_core.retrospect.claims: FOR UPDATE SKIP
LOCKED); then consolidation and decay of the 20 namespaces by 1 process, then by 2 splitting
them by lease (memory_core.leases), as the Prefect flows do. Each worker runs the same stage
bodies as `hindsight retrospect` (tasks.plain) and the flows' per-namespace leasing
(memory_core.leases.each_leased). Checks every run was processed exactly once (every
trajectory done after one claim, no card twice, the same cards and evidence as one process)
and every namespace consolidated and decayed by exactly one worker. Rules only, no embedder
(HINDSIGHT_EMBEDDING__PROVIDER=none: the embedded vector index is one process's alone).
Medians of 3, load average printed with each.

    python bench/scale_batch.py [--runs 600] [--namespaces 20] [--repeats 3]

Writes bench/results/scale_batch.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RESULTS = REPO / "bench" / "results"
PG_ADMIN = os.environ.get(
    "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
BATCH = 25  # trajectories per claim: 24 batches of 600 runs for the workers to share


def load() -> str:
    """The load average, as `uptime` prints it."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def ns_name(i: int) -> str:
    """The i-th namespace."""
    return f"team-{i:02d}"


# -- the worker processes -------------------------------------------------------------------


def _start_together() -> None:
    """Wait for the moment the driver set (BENCH_START_AT): the workers' imports take seconds
    on a busy machine, and one that starts late finds the work done or redoes a namespace."""
    time.sleep(max(0.0, float(os.environ.get("BENCH_START_AT", "0")) - time.time()))


def work_retrospect() -> dict:
    """Claim and retrospect batches until nothing is pending (`hindsight retrospect`'s loop)."""
    from memory_core.retrospect.claims import worker_id
    from memory_core.settings import Settings
    from tasks.plain import retrospect_rule_batch

    settings = Settings()
    worker, batches, runs = worker_id(), 0, 0
    _start_together()
    started = time.time()
    cpu = time.process_time()
    while (b := retrospect_rule_batch(None, worker, settings)).claimed:
        batches, runs = batches + 1, runs + b.claimed
    return {
        "started": started,
        "ended": time.time(),
        "cpu_s": time.process_time() - cpu,
        "batches": batches,
        "runs": runs,
    }


def work_maintain(now_iso: str) -> dict:
    """Consolidate, then decay, each namespace this process gets the lease of (as the flows)."""
    from datetime import datetime

    from memory_core.consolidate.stage import live_namespaces
    from memory_core.decay import DecayParams
    from memory_core.leases import each_leased
    from memory_core.settings import Settings
    from tasks.plain import decay_run
    from tasks.plain_consolidate import consolidate_run
    from tasks.runtime import engine_for

    settings = Settings()
    engine = engine_for(settings)
    names = live_namespaces(engine=engine)
    _start_together()
    started, cpu = time.time(), time.process_time()
    merged, _ = each_leased(
        engine=engine,
        stage="consolidate",
        namespaces=names,
        run=lambda ns: consolidate_run(ns, False, settings).merges,
    )
    rules = DecayParams(**settings.decay.model_dump(), now=datetime.fromisoformat(now_iso))
    decayed, _ = each_leased(
        engine=engine,
        stage="decay",
        namespaces=names,
        run=lambda ns: decay_run(rules, ns, settings).total,
    )
    return {
        "started": started,
        "ended": time.time(),
        "cpu_s": time.process_time() - cpu,
        "consolidated": [ns for ns, _ in merged],
        "merges": sum(m for _, m in merged),
        "decayed": [ns for ns, _ in decayed],
        "decay_changes": sum(n for _, n in decayed),
    }


# -- the driver -----------------------------------------------------------------------------


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def fresh_database() -> str:
    """A new, migrated PostgreSQL database (as tests/conftest.py makes them)."""
    import psycopg

    from memory_core import db
    from memory_core.settings import Settings

    name = f"hindsight_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_plain(PG_ADMIN), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{_plain(PG_ADMIN).rsplit('/', 1)[0]}/{name}"
    with tempfile.TemporaryDirectory(prefix="hs-batch-") as data:
        db.upgrade(Settings(database_url=url, data_dir=Path(data)))
    return url


def drop_database(url: str) -> None:
    """Drop a database fresh_database made."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(_plain(PG_ADMIN), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def backlog(url: str, runs: int, namespaces: int) -> None:
    """`runs` replicated tau-bench runs, new ids, spread evenly over the namespaces."""
    from memory_core import db
    from memory_core.ingest.store import ingest
    from memory_core.settings import Settings
    from tests.helpers.data import replicate, tau_runs

    engine = db.make_engine(Settings(database_url=url))
    records = [(f"r{i}", r) for i, r in enumerate(replicate(tau_runs(), runs))]
    for k in range(namespaces):
        part = iter(records[k::namespaces])
        ingest(engine=engine, records=part, namespace=ns_name(k), task_type="airline")
    engine.dispose()


def spawn(url: str, procs: int, stage: list[str]) -> list[dict]:
    """`procs` workers of one stage started together; what each reports."""
    with tempfile.TemporaryDirectory(prefix="hs-batch-") as data:  # removed when all are done
        return _spawn(url, procs, stage, Path(data))


def _spawn(url: str, procs: int, stage: list[str], data: Path) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HINDSIGHT_", "PREFECT_"))}
    env |= {
        "HINDSIGHT_DATABASE_URL": url,
        "HINDSIGHT_DATA_DIR": str(data),
        "HINDSIGHT_EMBEDDING__PROVIDER": "none",
        "HINDSIGHT_RETROSPECT__BATCH_SIZE": str(BATCH),
        "HINDSIGHT_RETROSPECT__LEASE_SECONDS": "600",  # no claim expires: each taken once
        "PYTHONPATH": str(REPO),
        "BENCH_START_AT": str(time.time() + 15),  # after every worker's imports
    }
    cmd = [sys.executable, __file__, "--worker", *stage]
    ps = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(procs)
    ]
    out = []
    for p in ps:  # a worker ready after the start time says so by its "started"
        stdout, stderr = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"worker failed: {stderr[-3000:]}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def validate(url: str) -> None:
    """The validation stage over every draft, in this process."""
    from memory_core.settings import Settings
    from tasks.plain import validate_run

    with tempfile.TemporaryDirectory(prefix="hs-batch-") as data:
        validate_run(None, Settings(database_url=url, data_dir=Path(data)))


def state_of(url: str) -> dict:
    """What the checks compare: trajectories per status and most claims of one, cards per
    (namespace, signature) twice or more, evidence rows, and every card's status and numbers."""
    from sqlalchemy import func, select
    from sqlmodel import Session

    from memory_core import db
    from memory_core.models.card import Card, CardEvidence
    from memory_core.models.trajectory import Trajectory
    from memory_core.settings import Settings
    from memory_core.status import trajectory_counts

    engine = db.make_engine(Settings(database_url=url))
    with Session(engine) as s:
        cards = s.execute(
            select(Card.namespace, Card.signature, Card.status, Card.confidence)
        ).all()
        evidence = s.execute(select(func.count()).select_from(CardEvidence)).scalar_one()
        attempts = s.execute(select(func.max(Trajectory.attempts))).scalar_one()
    counts = trajectory_counts(engine=engine)
    engine.dispose()
    twice = [k for k, n in Counter((c.namespace, c.signature) for c in cards).items() if n > 1]
    return {
        "trajectories": counts,
        "max_claims_per_run": attempts,
        "cards": len(cards),
        "duplicate_cards": len(twice),
        "evidence_rows": evidence,
        "fingerprint": sorted(
            (c.namespace, c.signature, c.status, round(c.confidence, 6)) for c in cards
        ),
    }


def one_round(args, procs: int) -> dict:
    """A fresh database, the backlog, retrospection by `procs` workers, then consolidation and
    decay by `procs` workers; timings and the state after each stage."""
    from memory_core.models.columns import utcnow

    url = fresh_database()
    try:
        backlog(url, args.runs, args.namespaces)
        retro = spawn(url, procs, ["retrospect"])
        after_retro = state_of(url)
        validate(url)  # drafts -> active cards (one process: not a stage measured here)
        later = (utcnow() + timedelta(days=120)).isoformat()  # every card unused long enough
        maint = spawn(url, procs, ["maintain", later])
        after_maint = state_of(url)
    finally:
        drop_database(url)
    span_r = max(w["ended"] for w in retro) - min(w["started"] for w in retro)
    span_m = max(w["ended"] for w in maint) - min(w["started"] for w in maint)
    consolidated = Counter(ns for w in maint for ns in w["consolidated"])
    decayed = Counter(ns for w in maint for ns in w["decayed"])
    return {
        "procs": procs,
        "retrospect_s": round(span_r, 2),
        "runs_per_s": round(args.runs / span_r, 1),
        "runs_per_worker": [w["runs"] for w in retro],
        "retrospect_cpu_s": [round(w["cpu_s"], 2) for w in retro],
        "maintain_s": round(span_m, 2),
        "namespaces_per_s": round(args.namespaces / span_m, 2),
        "namespaces_per_worker": [len(w["consolidated"]) for w in maint],
        "maintain_cpu_s": [round(w["cpu_s"], 2) for w in maint],
        "consolidated_twice": sum(1 for n in consolidated.values() if n > 1),
        "consolidated_missing": args.namespaces - len(consolidated),
        "decayed_twice": sum(1 for n in decayed.values() if n > 1),
        "decayed_missing": args.namespaces - len(decayed),
        "start_skew_s": round(
            max(
                max(w["started"] for w in ws) - min(w["started"] for w in ws)
                for ws in (retro, maint)
            ),
            2,
        ),
        "merges": sum(w["merges"] for w in maint),
        "decay_changes": sum(w["decay_changes"] for w in maint),
        "after_retrospect": after_retro,
        "after_maintain": after_maint,
        "load": load(),
    }


def _checks(r: dict, runs: int, reference: dict) -> dict:
    """Exactly once: every run done after one claim, no card twice, the one-process result."""
    a = r["after_retrospect"]
    return {
        "lost_runs": runs - a["trajectories"].get("done", 0),
        "runs_claimed_twice": int(a["max_claims_per_run"] > 1),
        "duplicate_cards": a["duplicate_cards"] + r["after_maintain"]["duplicate_cards"],
        "same_cards_as_one_process": a["fingerprint"]
        == reference["after_retrospect"]["fingerprint"]
        and a["evidence_rows"] == reference["after_retrospect"]["evidence_rows"],
        "same_after_maintenance": r["after_maintain"]["fingerprint"]
        == reference["after_maintain"]["fingerprint"],
        "namespaces_twice_or_missing": r["consolidated_twice"]
        + r["consolidated_missing"]
        + r["decayed_twice"]
        + r["decayed_missing"],
    }


def main() -> None:
    """1 process, then 2, `repeats` times each (alternating); medians and the checks."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=600)
    ap.add_argument("--namespaces", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--worker", nargs="+")
    args = ap.parse_args()
    if args.worker:
        stage = args.worker[0]
        out = work_retrospect() if stage == "retrospect" else work_maintain(args.worker[1])
        print(json.dumps(out))
        return
    rounds: dict[int, list[dict]] = {1: [], 2: []}
    for rep in range(args.repeats):
        for procs in (1, 2):
            r = one_round(args, procs)
            rounds[procs].append(r)
            print(
                f"run {rep + 1}, {procs} process(es): retrospect {r['runs_per_s']} runs/s "
                f"({r['runs_per_worker']}, CPU {r['retrospect_cpu_s']} s), "
                f"consolidate+decay {r['namespaces_per_s']} ns/s "
                f"({r['namespaces_per_worker']}, CPU {r['maintain_cpu_s']} s), load {r['load']}",
                flush=True,
            )
    reference = rounds[1][0]
    summary: dict = {"runs": args.runs, "namespaces": args.namespaces, "batch_size": BATCH}
    for procs, rs in rounds.items():
        checks = [_checks(r, args.runs, reference) for r in rs]
        summary[f"procs_{procs}"] = {
            "runs_per_s": statistics.median(r["runs_per_s"] for r in rs),
            "namespaces_per_s": statistics.median(r["namespaces_per_s"] for r in rs),
            "load": [r["load"] for r in rs],
            "checks": checks,
            "rounds": [
                {k: v for k, v in r.items() if k not in ("after_retrospect", "after_maintain")}
                | {"cards": r["after_retrospect"]["cards"]}
                for r in rs
            ],
        }
    summary["retrospect_ratio"] = round(
        summary["procs_2"]["runs_per_s"] / summary["procs_1"]["runs_per_s"], 2
    )
    summary["maintain_ratio"] = round(
        summary["procs_2"]["namespaces_per_s"] / summary["procs_1"]["namespaces_per_s"], 2
    )
    print(json.dumps({k: v for k, v in summary.items() if not k.startswith("procs")}))
    for procs in (1, 2):
        s = summary[f"procs_{procs}"]
        print(procs, s["runs_per_s"], s["namespaces_per_s"], s["checks"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale_batch.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
