"""Kill the retrospect worker (SIGKILL) mid-run, again and again; the result must not change."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from sqlalchemy import func, select
from sqlmodel import Session

from memory_core import db
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardEvidence, CardVersion
from memory_core.models.trajectory import Trajectory
from memory_core.settings import Settings
from memory_core.status import trajectory_counts
from tests.helpers.data import REPO, replicate, tau_runs
from tests.helpers.pipeline import card_fingerprint, retrospect_all

RUNS = 1400
LEASE_S = 1.0


def _spawn(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.retrospect_worker"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_sigkill_mid_batch_loses_nothing_and_duplicates_nothing(engine, env_for, tmp_path):
    runs = replicate(tau_runs(), RUNS)
    records = [(f"r{i}", r) for i, r in enumerate(runs)]
    ingest(engine=engine, records=iter(records), namespace="default", task_type="default")

    # the reference: the same runs retrospected without interruption, in a separate SQLite file
    ref = Settings(data_dir=tmp_path / "reference")
    db.upgrade(ref)
    ref_engine = db.make_engine(ref)
    ingest(engine=ref_engine, records=iter(records), namespace="default", task_type="default")
    retrospect_all(ref_engine)
    expected = card_fingerprint(ref_engine)

    env = {
        **env_for,
        "HINDSIGHT_LEASE_SECONDS": str(LEASE_S),
        "HINDSIGHT_RETROSPECT_BATCH_SIZE": "40",
        "PYTHONPATH": str(REPO),
    }
    rng = random.Random(7)
    mid_batch_kills = 0
    # kill at random moments until two kills have caught a worker holding claimed runs
    while mid_batch_kills < 2:
        done_before = trajectory_counts(engine=engine).get("done", 0)
        assert done_before < 0.9 * RUNS, "ran out of work before catching a worker mid-batch"
        proc = _spawn(env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if trajectory_counts(engine=engine).get("done", 0) > done_before + 80:
                break
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.2))
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if trajectory_counts(engine=engine).get("processing", 0):
            mid_batch_kills += 1
        time.sleep(LEASE_S + 0.2)  # the dead worker's claims expire
    assert trajectory_counts(engine=engine).get("done", 0) < RUNS  # the kills left work behind

    final = _spawn(env)
    assert final.wait(timeout=300) == 0, final.stderr.read().decode()[-2000:]

    assert trajectory_counts(engine=engine) == {"done": RUNS}
    assert card_fingerprint(engine) == expected
    with Session(engine) as s:
        cards = s.execute(select(func.count()).select_from(Card)).scalar_one()
        versions = s.execute(select(func.count()).select_from(CardVersion)).scalar_one()
        evidence = s.execute(select(func.count()).select_from(CardEvidence)).scalar_one()
        attempts = s.execute(select(func.max(Trajectory.attempts))).scalar_one()
    assert versions == cards
    assert evidence == sum(n for _, n, _ in expected.values())
    assert attempts >= 2  # some claims died with a killed worker and were taken over
