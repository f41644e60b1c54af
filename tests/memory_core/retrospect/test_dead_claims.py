"""Claims of a worker that is gone are given back at once; a live worker's claims are named
with their end. Real worker processes, a real SIGKILL, a real SIGSTOP (a worker hung: its
process alive, its heartbeat silent), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from memory_core.heartbeat import Heartbeat, beat
from memory_core.ingest.store import ingest, iter_sources
from memory_core.leases import held_claims, owner_gone, release_dead_claims
from memory_core.retrospect.claims import claim_batch
from memory_core.status import trajectory_counts
from tests.helpers.cli import hindsight
from tests.helpers.data import REPO

# a worker that claims a batch for ten minutes, says how many, and holds them, beating as
# the settings say (its id: argv[1], or this process's own)
_CLAIMER = """
import sys, time
from datetime import timedelta
from memory_core import db
from memory_core.heartbeat import Heartbeat, Liveness
from memory_core.settings import Settings
from memory_core.retrospect.claims import claim_batch, worker_id
settings = Settings()
engine = db.make_engine(settings)
live = Liveness.of(settings.retrospect)
worker = sys.argv[1] if len(sys.argv) > 1 else worker_id()
rows = claim_batch(
    engine=engine, worker=worker, batch_size=5, lease=timedelta(minutes=10), liveness=live
)
with Heartbeat(engine=engine, worker=worker, every=live.every):
    print(len(rows), flush=True)
    time.sleep(600)
"""


@contextmanager
def claimer(env: dict[str, str], *worker: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLAIMER, *worker],
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
            os.kill(proc.pid, signal.SIGKILL)  # a stopped process dies of it too
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
        said = shown.stdout.replace("\n", " ")
        assert "5 trajectories are claimed by a running worker" in said
        assert f":{proc.pid}:" in said and " UTC" in said and "last heartbeat" in said
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


# beats twice a second; a silence of 4 s frees the claims (the CLI's start takes longer than
# that on a loaded host, so a claim still named held was beaten meanwhile)
_FAST = {
    "HINDSIGHT_RETROSPECT__HEARTBEAT_SECONDS": "0.5",
    "HINDSIGHT_RETROSPECT__STALE_AFTER_SECONDS": "4",
}


def test_a_silent_worker_on_another_host_loses_its_claims(engine, env_for) -> None:
    """Its pid cannot be checked from here: only its heartbeat tells. Beating, it keeps its
    runs past the silence allowed; stopped (SIGSTOP: alive, hung), it loses them to the next
    run at once, long before its ten-minute lease ends."""
    total = _ingest(engine)
    env = {**env_for, **_FAST}
    with claimer(env, "another-host:4242:abcd1234") as proc:
        time.sleep(5)  # longer than the silence allowed: only the beats keep the claims
        shown = hindsight(env, "retrospect")
        said = shown.stdout.replace("\n", " ")
        assert "5 trajectories are claimed by a running worker (another-host:4242" in said
        assert "return to the queue 4 s after its last heartbeat" in said
        assert trajectory_counts(engine=engine) == {"done": total - 5, "processing": 5}
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(5)
        out = json.loads(hindsight(env, "retrospect", "-f", "json").stdout)
        assert out["trajectories"] == 5
        assert trajectory_counts(engine=engine) == {"done": total}
        assert held_claims(engine=engine) == []


def test_a_heartbeat_keeps_a_claim_that_a_silence_frees(engine) -> None:
    """In process: the beat moves the claim's heartbeat on; a claim whose beat is older than
    stale_after is released, one beaten within it is not; another worker then claims it."""
    total = _ingest(engine)
    live, other = "another-host:1:aaaa0000", "another-host:2:bbbb0000"
    rows = claim_batch(engine=engine, worker=live, batch_size=3, lease=timedelta(minutes=10))
    first = {r.id: r.lease_heartbeat for r in rows}
    assert len(first) == 3 and all(first.values())
    with Heartbeat(engine=engine, worker=live, every=timedelta(seconds=0.2)):
        time.sleep(1.0)
    [held] = held_claims(engine=engine)
    assert held.owner == live and held.runs == 3 and held.beat is not None
    assert held.beat > max(b for b in first.values() if b is not None)
    # beaten well within 5 s: kept; with a silence allowed of 0.5 s it is too old by now
    assert release_dead_claims(engine=engine, stale_after=timedelta(seconds=5)) == 0
    time.sleep(0.6)
    assert release_dead_claims(engine=engine, stale_after=timedelta(seconds=0.5)) == 3
    again = claim_batch(engine=engine, worker=other, batch_size=total, lease=timedelta(minutes=1))
    assert len(again) == total
    assert beat(engine=engine, worker=live) == 0  # nothing of its own left to beat for
    assert beat(engine=engine, worker=other) == total
