"""Claims of a worker that is gone are given back at once; a live worker's claims are named
with their end. Real worker processes, a real SIGKILL, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from memory_core.ingest.store import ingest, iter_sources
from memory_core.leases import held_claims, owner_gone
from memory_core.status import trajectory_counts
from tests.helpers.cli import hindsight
from tests.helpers.data import REPO

# a worker that claims a batch for ten minutes, says how many, and holds them
_CLAIMER = """
import time
from datetime import timedelta
from memory_core import db
from memory_core.settings import Settings
from memory_core.retrospect.claims import claim_batch, worker_id
engine = db.make_engine(Settings())
rows = claim_batch(engine=engine, worker=worker_id(), batch_size=5, lease=timedelta(minutes=10))
print(len(rows), flush=True)
time.sleep(600)
"""


@contextmanager
def claimer(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLAIMER],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "5"
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _ingest(engine) -> int:
    report = ingest(
        engine=engine,
        records=iter_sources([str(REPO / "examples")]),
        namespace="default",
        task_type="default",
    )
    return report.stored


def test_a_killed_workers_claims_are_given_back_at_once(engine, env_for) -> None:
    total = _ingest(engine)
    with claimer(env_for) as proc:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # the claims outlive the process: ten minutes of lease left on them
    assert trajectory_counts(engine=engine)["processing"] == 5
    out = json.loads(hindsight(env_for, "retrospect", "-f", "json").stdout)
    assert out["trajectories"] == total
    assert trajectory_counts(engine=engine) == {"done": total}


def test_a_live_workers_claims_are_named_with_their_end(engine, env_for) -> None:
    total = _ingest(engine)
    with claimer(env_for) as proc:
        shown = hindsight(env_for, "retrospect")
        assert "5 trajectories are claimed by a running worker" in shown.stdout.replace("\n", " ")
        assert f":{proc.pid}:" in shown.stdout and " UTC" in shown.stdout
        [held] = held_claims(engine=engine)
        assert held.runs == 5 and not owner_gone(held.owner)
        assert trajectory_counts(engine=engine) == {"done": total - 5, "processing": 5}


def test_only_a_process_provably_gone_counts_as_gone() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    import socket

    host = socket.gethostname()[:24]
    assert owner_gone(f"{host}:{gone.pid}:abcd1234")
    assert not owner_gone(f"{host}:{os.getpid()}:abcd1234")  # this very process
    assert not owner_gone(f"another-host:{gone.pid}:abcd1234")  # cannot be checked from here
    assert not owner_gone("no worker id")
