"""The nightly flow under LLM chaos, then one Retry with the LLM healthy.

The tau-bench airline runs are replicated (each copy with its own id, and its own text, so the
LLM answer cache does not hide the faults) to `--total` trajectories. A keyed scripted
OpenAI-compatible server (tests/helpers/scripted_llm.py) fails a share p of calls with a mix
of 500, 429, stalls past the client timeout and invalid JSON. For each backend and p: a fresh
database, the nightly flow (in process, on a Prefect test server), then the chaos stops and the
same flow run is retried the way `prefect flow-run retry <id>` retries a run without a
deployment (state Scheduled, then run again: run_count 2). Before that chaotic run, `--kills`
worker processes (`hindsight nightly` against the same Prefect server, database and LLM) are
started one after another and SIGKILLed, process group and all, at a random moment while they
hold claims; their leases run out and the in-process nightly takes the work over. After each
kill the bench checks that no process of the killed group is left.

Reported per (backend, p): rule cards present (% of the no-fault run's), trajectories lost,
summary artifacts published (% of flow runs), the flow state after the chaotic run and after
the Retry, and whether the cards after the Retry equal the no-fault run's.

    python bench/chaos.py [--total 1120] [--ps 0 0.1 0.5 1] [--backends sqlite postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
PG_ADMIN = os.environ.get(
    "HINDSIGHT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
KEY = "sk-chaos-bench"
TIMEOUT_S = 0.5
LEASE_S = 10.0  # short enough to wait out after a kill, longer than any batch under chaos


class Chaos:
    """Decides each call's fate: a share p fails (500, 429, a stall past the timeout, bad JSON)."""

    def __init__(self, p: float, seed: int = 7) -> None:
        self.p, self.rng, self.lock = p, random.Random(seed), threading.Lock()
        self.faults: dict[str, int] = {"500": 0, "429": 0, "stall": 0, "invalid_json": 0}

    def __call__(self, body: dict[str, Any], n: int) -> Any:
        from tests.helpers import fake_model
        from tests.helpers.scripted_llm import Reply

        with self.lock:
            fail = self.rng.random() < self.p
            kind = self.rng.choice(list(self.faults)) if fail else ""
            if fail:
                self.faults[kind] += 1
        if kind == "500":
            return Reply(status=500, error="model crashed")
        if kind == "429":
            return Reply(status=429, error="rate limited")
        if kind == "stall":
            return Reply("{}", delay_s=TIMEOUT_S * 3)
        if kind == "invalid_json":
            return Reply("{not json at all")
        if "durable facts" in body["messages"][0]["content"]:
            return Reply(json.dumps({"facts": []}))
        return fake_model.respond(body, n)


def _runs(total: int) -> list[dict[str, Any]]:
    from tests.helpers.data import replicate, tau_runs

    out = replicate(tau_runs(), total)
    for rec in out:  # each copy its own text: the answer cache must not hide the faults
        for m in rec["traj"]:
            if m.get("role") == "user" and isinstance(m.get("content"), str):
                m["content"] = f"[{rec['id']}] {m['content']}"
                break
    return out


def _database(backend: str, tmp: Path) -> str | None:
    if backend == "sqlite":
        return None
    import psycopg

    name = f"hindsight_chaos_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}"


def _drop(url: str | None) -> None:
    if url is None:
        return
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def _cards(engine: Any) -> set[tuple[str, str, str]]:
    from sqlalchemy import select
    from sqlmodel import Session

    from memory_core.models.card import Card

    with Session(engine) as s:
        rows = s.execute(select(Card.kind, Card.status, Card.signature)).all()
    return {(k, st, sig or "") for k, st, sig in rows}


def _rule_cards(engine: Any) -> int:
    from sqlalchemy import select
    from sqlmodel import Session

    from memory_core.models.card import Card

    with Session(engine) as s:
        cards = s.execute(select(Card.signature, Card.provenance)).all()
    return len({sig for sig, prov in cards if (prov or {}).get("producer") == "rule-extractor"})


def _summaries(flow_run_id: uuid.UUID) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    from flows.report import SUMMARY_KEY

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return sum(1 for a in found if a.key == SUMMARY_KEY)


def _retry(flow_run_id: uuid.UUID) -> Any:
    """What `prefect flow-run retry <id> --entrypoint flows/nightly.py:nightly` does."""
    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow
    from prefect.states import Scheduled

    from flows.nightly import nightly
    from flows.params import NightlyParams

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run_id, Scheduled(message="Retried"), force=True)
        flow_run = client.read_flow_run(flow_run_id)
    params = flow_run.parameters or {}
    state = run_flow(
        flow=nightly,
        flow_run=flow_run,
        parameters={"params": NightlyParams.model_validate(params.get("params", {}))},
        return_type="state",
    )
    return state


def _alive(pgid: int) -> list[int]:
    """Processes still in a (killed) process group."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getpgid(int(d.name)) == pgid:
                out.append(int(d.name))
        except ProcessLookupError:
            continue
    return out


def _kill_workers(engine: Any, kills: int, rng: random.Random) -> dict[str, Any]:
    """Start `hindsight nightly` workers one after another; SIGKILL each, group and all, at a
    random moment once it holds claims. Returns how many were killed mid-batch and orphans."""
    import signal
    import subprocess

    from prefect.settings import PREFECT_API_URL

    from memory_core.status import trajectory_counts

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    exe = Path(sys.executable).parent / "hindsight"
    out: dict[str, Any] = {"kills": 0, "holding_claims": 0, "orphans": 0, "ended_alone": 0}
    for _ in range(kills):
        proc = subprocess.Popen(
            [str(exe), "nightly"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own group: the kill reaches its children too
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if trajectory_counts(engine=engine).get("processing"):
                break
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 3.0))  # somewhere inside the run, not only at its start
        if proc.poll() is not None:
            out["ended_alone"] += 1
            continue
        out["holding_claims"] += bool(trajectory_counts(engine=engine).get("processing"))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        out["kills"] += 1
        time.sleep(0.5)
        out["orphans"] += len(_alive(proc.pid))
        time.sleep(LEASE_S)  # the dead worker's claims expire
    return out


def one(backend: str, p: float, total: int, llm: Any, tmp: Path, kills: int = 0) -> dict[str, Any]:
    """One fresh database through a chaotic nightly and one Retry."""
    from flows.nightly import nightly
    from flows.params import NightlyParams
    from memory_core import db
    from memory_core.ingest.store import ingest
    from memory_core.settings import Settings
    from memory_core.status import trajectory_counts

    url = _database(backend, tmp)
    data = tmp / f"{backend}-{p}"
    os.environ["HINDSIGHT_DATA_DIR"] = str(data)
    if url:
        os.environ["HINDSIGHT_DATABASE_URL"] = url
    else:
        os.environ.pop("HINDSIGHT_DATABASE_URL", None)
    settings = Settings()
    db.upgrade(settings)
    engine = db.make_engine(settings)
    runs = _runs(total)
    ingest(
        engine=engine,
        records=((r["id"], r) for r in runs),
        namespace="default",
        task_type="default",
    )
    chaos = Chaos(p)
    llm.responder = chaos
    killed = _kill_workers(engine, kills, random.Random(int(p * 100) + 11))
    started = time.perf_counter()
    first = nightly(NightlyParams(), return_state=True)
    first_s = time.perf_counter() - started
    run_id = first.state_details.flow_run_id
    counts = trajectory_counts(engine=engine)
    rule_cards = _rule_cards(engine)
    lost = total - counts.get("done", 0) - counts.get("dead_letter", 0)
    llm.responder = Chaos(0.0)
    started = time.perf_counter()
    second = _retry(run_id)
    retry_s = time.perf_counter() - started
    after = trajectory_counts(engine=engine)
    cards = _cards(engine)
    engine.dispose()
    _drop(url)
    return {
        "backend": backend,
        "p": p,
        "trajectories": total,
        "faults": chaos.faults,
        "workers_killed": killed,
        "first": {
            "state": first.type.value,
            "message": first.message,
            "seconds": round(first_s, 1),
            "trajectories": counts,
        },
        "rule_cards": rule_cards,
        "lost": lost,
        "lost_after_retry": total - after.get("done", 0) - after.get("dead_letter", 0),
        "summaries": _summaries(run_id),
        "retry": {
            "state": second.type.value,
            "message": second.message,
            "seconds": round(retry_s, 1),
            "trajectories": after,
        },
        "cards": sorted(cards),
    }


def main() -> None:
    """Run the table and write bench/results/chaos.json."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--total", type=int, default=1120)
    ap.add_argument("--ps", type=float, nargs="+", default=[0.0, 0.1, 0.5, 1.0])
    ap.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    ap.add_argument("--kills", type=int, default=3, help="workers SIGKILLed before the run")
    ap.add_argument("--out", type=Path, default=RESULTS / "chaos.json")
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    from tests.helpers.scripted_llm import ScriptedLLM

    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        prefect_test_harness(server_startup_timeout=180),
        ScriptedLLM(Chaos(0.0), api_key=KEY) as llm,
    ):
        os.environ.update(
            {
                "HINDSIGHT_LLM__BASE_URL": llm.url,
                "HINDSIGHT_LLM__MODEL": "scripted-1",
                "HINDSIGHT_LLM__API_KEY": KEY,
                "HINDSIGHT_LLM__TIMEOUT_S": str(TIMEOUT_S),
                "HINDSIGHT_LLM__RETRY_DELAYS_S": "[0.05, 0.1]",
                "HINDSIGHT_EMBEDDING__PROVIDER": "none",
                "HINDSIGHT_RETROSPECT__LEASE_SECONDS": str(LEASE_S),
            }
        )
        for backend in args.backends:
            base: set[Any] | None = None
            base_rules = 0
            for p in sorted(args.ps):
                r = one(backend, p, args.total, llm, Path(tmp), args.kills)
                cards = {tuple(c) for c in r.pop("cards")}
                if p == 0.0:
                    base, base_rules = cards, r["rule_cards"]
                r["rule_cards_pct"] = (
                    round(100 * r["rule_cards"] / base_rules, 1) if base_rules else None
                )
                r["cards_equal_no_fault_after_retry"] = (
                    (cards == base) if base is not None else None
                )
                r["cards_differing"] = len(cards ^ base) if base is not None else None
                r["cards_diff"] = (
                    [  # which (kind, status, signature) differ, for a look
                        ["no-fault" if c in base else "this run", *c] for c in sorted(cards ^ base)
                    ][:20]
                    if base is not None
                    else []
                )
                rows.append(r)
                killed = r["workers_killed"]
                print(
                    f"{backend:10} p={p:4.0%}  rule cards {r['rule_cards_pct']}%  lost {r['lost']}"
                    f"  killed {killed['kills']} (orphans {killed['orphans']})"
                    f"  summaries {r['summaries']}/2  first {r['first']['state']}"
                    f" ({r['first']['seconds']} s)  retry {r['retry']['state']}"
                    f"  cards = no-fault: {r['cards_equal_no_fault_after_retry']}"
                    f" (differ {r['cards_differing']})",
                    flush=True,
                )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"total": args.total, "llm_timeout_s": TIMEOUT_S, "runs": rows}
    args.out.write_text(json.dumps(out, indent=2, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
