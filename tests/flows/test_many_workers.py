"""Batch stages on many workers: three `prefect worker` processes on one work pool of a real
`prefect server`, PostgreSQL behind them, three decay runs at once. The runs split the
namespaces through leases (memory_core.leases): every card fades once, none is missed, each
namespace is changed by one run. The leases themselves on both databases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL, temporary_settings
from sqlalchemy import func, select
from sqlmodel import Session

from memory_core import db
from memory_core.leases import Leases, each_leased
from memory_core.models.card import Card, CardVersion
from memory_core.models.columns import utcnow
from memory_core.settings import Settings
from tests.conftest import _empty
from tests.helpers.data import REPO
from tests.helpers.net import free_port

BIN = Path(sys.executable).parent
NAMESPACES = [f"team-{i:02d}" for i in range(24)]
PER_NAMESPACE = 400
START_AFTER_S = 30  # time for three run processes to start and load the flow


def test_a_lease_is_held_by_one_run_at_a_time(engine) -> None:
    with Leases(engine=engine, stage="decay") as a, Leases(engine=engine, stage="decay") as b:
        assert a.take("team-a") and a.take("team-a")  # again: still ours
        assert not b.take("team-a")
        assert b.take("team-b") and not a.take("team-b")
        with Leases(engine=engine, stage="consolidate") as other_stage:
            assert other_stage.take("team-a")  # one lease per stage and namespace
    with Leases(engine=engine, stage="decay") as c:  # both runs ended: free again
        assert c.take("team-a") and c.take("team-b")
    with Leases(engine=engine, stage="decay") as held:
        held.take("team-b")
        done, elsewhere = each_leased(
            engine=engine, stage="decay", namespaces=["team-a", "team-b"], run=str.upper
        )
    assert done == [("team-a", "TEAM-A")] and elsewhere == ["team-b"]


def _seed(engine) -> None:
    with Session(engine) as s:
        for ns in NAMESPACES:
            s.add_all(
                Card(
                    namespace=ns,
                    scenario=f"{ns} lesson {i}",
                    preconditions=[f'tool == "t{i}"'],
                    action_sequence=[{"tool": f"t{i}", "params_template": {}}],
                    confidence=0.8,
                    status="active",
                    signature=f"{ns}-{i}",
                    provenance={"producer": "test", "origin": "operator"},
                )
                for i in range(PER_NAMESPACE)
            )
        s.commit()


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {timeout_s:.0f} s: {log.read_text()[-3000:]}")


def test_three_workers_split_the_decay_backlog(pg_url, tmp_path) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_url)
    engine = db.make_engine(settings)
    _empty(engine)  # the session's database: whatever other tests left goes
    _seed(engine)
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HINDSIGHT_", "PREFECT_"))}
    env.update(
        {
            "HINDSIGHT_DATA_DIR": str(settings.data_dir),
            "HINDSIGHT_DATABASE_URL": pg_url,
            "HINDSIGHT_EMBEDDING__PROVIDER": "none",
            # this checkout's flows, wherever the package is installed
            "PYTHONPATH": str(REPO),
            "PREFECT_HOME": str(tmp_path / "prefect"),
            "PREFECT_API_URL": api,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_WORKER_QUERY_SECONDS": "1",
            # the runs are handed to the workers as soon as they exist: each process starts,
            # loads the flow and waits for the one start time (the server's WaitForScheduledTime)
            "PREFECT_WORKER_PREFETCH_SECONDS": str(START_AFTER_S * 4),
            # each run's summary where this test can read it
            "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true",
            "PREFECT_LOCAL_STORAGE_PATH": str(tmp_path / "results"),
        }
    )
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            p = subprocess.Popen(
                [str(BIN / args[0]), *args[1:]],
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        procs.append(p)
        return p, log

    try:
        # the API alone: runs started by hand need no scheduler, and no one looks at the UI
        server, log = start(
            "server", "prefect", "server", "start", "--port", str(port), "--no-services", "--no-ui"
        )
        _wait(f"{api}/health", server, log, timeout_s=120)
        for i in range(3):  # they start while the deployments are made
            start(f"worker{i}", "prefect", "worker", "start", "--pool", "hindsight-process")
        deployed = subprocess.run(
            [str(BIN / "hindsight"), "deploy"], env=env, cwd=REPO, capture_output=True, timeout=120
        )
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        later = (utcnow() + timedelta(days=40)).isoformat()  # every card idle past tier 1
        with temporary_settings({PREFECT_API_URL: api}):
            # one start time for the three: started as each process came up, on a loaded
            # machine the first run decayed every namespace before the others had loaded
            # (CI, a fresh clone beside other work), and the runs never met
            start_at = utcnow() + timedelta(seconds=START_AFTER_S)
            runs = [
                run_deployment(
                    "decay/decay",
                    parameters={"params": {"now": later}},
                    scheduled_time=start_at,
                    timeout=0,
                )
                for _ in range(3)
            ]
            deadline = time.monotonic() + START_AFTER_S + 180
            read: list = []
            with get_client(sync_client=True) as client:
                while time.monotonic() < deadline:
                    read = [client.read_flow_run(r.id) for r in runs]
                    states = [r.state for r in read]
                    if all(s is not None and s.is_final() for s in states):
                        break
                    time.sleep(1)
            assert all(s is not None and s.is_completed() for s in states), states
            summaries = [s.result() for s in states if s is not None]
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGINT)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
    # each namespace was changed by exactly one run, and every card once
    changed = [(ns, n) for s in summaries for ns, n in s.ran.items() if n]
    assert sorted(ns for ns, _ in changed) == NAMESPACES, [s.ran for s in summaries]
    assert all(n == PER_NAMESPACE for _, n in changed)
    assert sum(s.decayed for s in summaries) == len(NAMESPACES) * PER_NAMESPACE
    # the runs met: a run found namespaces leased by another, or more than one changed cards.
    # (Which run gets how many is timing; with one start time the three began within a second
    # of it, two busy loops beside them: 1,600 / 3,200 / 4,800 cards, each finding 12-19
    # namespaces held by another.)
    met = any(s.elsewhere for s in summaries) or sum(any(s.ran.values()) for s in summaries) >= 2
    assert met, ([(s.ran, s.elsewhere) for s in summaries], [r.start_time for r in read], start_at)
    with Session(engine) as s:
        rows = s.execute(select(Card.confidence, Card.decay_tier)).all()
        assert len(rows) == len(NAMESPACES) * PER_NAMESPACE
        assert all(c == pytest.approx(0.72) and tier == 1 for c, tier in rows)
        per_card = s.execute(
            select(func.count()).select_from(CardVersion).group_by(CardVersion.card_id)
        ).scalars()
        assert set(per_card) == {1}  # one history row each: no card faded twice
    engine.dispose()
