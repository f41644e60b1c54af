"""Kill the retrospect worker (SIGKILL) mid-run, again and again; the result must not change."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from memory_core import db
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardEvidence, CardVersion
from memory_core.models.trajectory import Trajectory
from memory_core.settings import Settings
from memory_core.status import trajectory_counts
from tests.helpers import fake_model
from tests.helpers.data import REPO, replicate, tau_runs
from tests.helpers.pipeline import card_fingerprint, retrospect_all
from tests.helpers.scripted_llm import ScriptedLLM

LEASE_S = 1.0


def _spawn(env: dict[str, str]) -> subprocess.Popen[bytes]:
    # stderr to a file, not a pipe: a worker that logs more than a pipe holds would block
    # mid-batch with nobody reading
    log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open for the worker; closed with it)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.retrospect_worker"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    proc.log = log  # type: ignore[attr-defined]
    return proc


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    log = proc.log  # type: ignore[attr-defined]
    log.seek(0)
    return log.read().decode(errors="replace")[-3000:]


def _kill_until_caught_mid_batch(engine, env: dict[str, str], runs: int, step: int) -> int:
    """Start and SIGKILL workers at random moments until two kills caught one holding claims."""
    rng, caught, kills = random.Random(7), 0, 0
    while caught < 2:
        done_before = trajectory_counts(engine=engine).get("done", 0)
        assert done_before < 0.9 * runs, "ran out of work before catching a worker mid-batch"
        proc = _spawn(env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if trajectory_counts(engine=engine).get("done", 0) >= done_before + step:
                break
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        # then strike the moment it holds claims (a batch of rule extraction takes only ms)
        until = time.monotonic() + 2
        while time.monotonic() < until and not trajectory_counts(engine=engine).get("processing"):
            time.sleep(0.002)
        try:
            assert proc.poll() is None, f"the worker ended by itself: {_stderr(proc)}"
        finally:  # never leave a worker writing to the database after the test
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        kills += 1
        if trajectory_counts(engine=engine).get("processing", 0):
            caught += 1
        time.sleep(LEASE_S + 0.2)  # the dead worker's claims expire
    assert trajectory_counts(engine=engine).get("done", 0) < runs  # the kills left work behind
    return kills


def _finish(env: dict[str, str]) -> None:
    final = _spawn(env)
    try:
        assert final.wait(timeout=900) == 0, _stderr(final)
    finally:
        if final.poll() is None:
            final.kill()
            final.wait()


# the uninterrupted run's result does not depend on the database under test (it runs on its own
# SQLite file): computed once per session, not once per database (95 s each under load)
_REFERENCES: dict[str, tuple[dict, int]] = {}  # kind -> (card fingerprint, prompts asked)


def _reference(tmp_path, records, **settings) -> dict:
    ref = Settings(data_dir=tmp_path / "reference", **settings)
    db.upgrade(ref)
    engine = db.make_engine(ref)
    ingest(engine=engine, records=iter(records), namespace="default", task_type="default")
    from memory_core.retrospect.factory import build_extractor

    retrospect_all(engine, extractor=build_extractor(ref, engine))
    return card_fingerprint(engine)


def _check_once(engine, runs: int, expected: dict) -> None:
    assert trajectory_counts(engine=engine) == {"done": runs}
    assert card_fingerprint(engine) == expected
    with Session(engine) as s:
        cards = s.execute(select(func.count()).select_from(Card)).scalar_one()
        versions = s.execute(select(func.count()).select_from(CardVersion)).scalar_one()
        evidence = s.execute(select(func.count()).select_from(CardEvidence)).scalar_one()
        attempts = s.execute(select(func.max(Trajectory.attempts))).scalar_one()
    assert versions == cards
    assert evidence == sum(n for _, n, _ in expected.values())
    assert attempts >= 2  # some claims died with a killed worker and were taken over


# 560 runs (4 copies of each tau-bench run): each batch contrasts whole task groups, so the
# cost grows with the copies; 1,400 runs outgrew the suite's 10-minute limit on a busy machine
@pytest.mark.timeout(1200)
def test_sigkill_mid_batch_loses_nothing_and_duplicates_nothing(engine, env_for, tmp_path):
    runs = 560
    records = [(f"r{i}", r) for i, r in enumerate(replicate(tau_runs(), runs))]
    ingest(engine=engine, records=iter(records), namespace="default", task_type="default")
    if "rules" not in _REFERENCES:
        _REFERENCES["rules"] = (_reference(tmp_path, records), 0)
    expected, _ = _REFERENCES["rules"]
    env = {
        **env_for,
        "HINDSIGHT_RETROSPECT__LEASE_SECONDS": str(LEASE_S),
        "HINDSIGHT_RETROSPECT__BATCH_SIZE": "40",
        "PYTHONPATH": str(REPO),
        "EXTRACT_DELAY_S": "0.004",  # a batch holds its claims for 160 ms or more
    }
    _kill_until_caught_mid_batch(engine, env, runs, step=80)
    _finish(env)
    _check_once(engine, runs, expected)


@pytest.mark.timeout(1200)
def test_sigkill_with_the_llm_extractor_pays_no_call_twice(engine, env_for, tmp_path):
    runs = 140
    records = [(f"r{i}", r) for i, r in enumerate(replicate(tau_runs(), runs))]
    ingest(engine=engine, records=iter(records), namespace="default", task_type="default")
    llm = {"model": "scripted-1", "mode": "instead"}
    if "llm" not in _REFERENCES:
        with ScriptedLLM(fake_model.respond) as ref_server:
            fingerprint = _reference(tmp_path, records, llm={"base_url": ref_server.url, **llm})
        _REFERENCES["llm"] = (fingerprint, len(ref_server.requests))
    expected, prompts = _REFERENCES["llm"]
    assert any(sig for sig in expected)  # the model had something to say
    with ScriptedLLM(fake_model.respond, latency_s=0.02) as server:
        env = {
            **env_for,
            "HINDSIGHT_RETROSPECT__LEASE_SECONDS": str(LEASE_S),
            "HINDSIGHT_RETROSPECT__BATCH_SIZE": "8",
            "PYTHONPATH": str(REPO),
            "HINDSIGHT_LLM__BASE_URL": server.url,
            "HINDSIGHT_LLM__MODEL": "scripted-1",
            "HINDSIGHT_LLM__MODE": "instead",
        }
        kills = _kill_until_caught_mid_batch(engine, env, runs, step=8)
        _finish(env)
        asked = Counter(
            (fake_model.prompt_kind(r), r["messages"][1]["content"]) for r in server.requests
        )
    _check_once(engine, runs, expected)
    # a prompt is asked again only if a kill landed between its answer and the cache write
    repeats = sum(n - 1 for n in asked.values())
    assert repeats <= kills
    assert len(asked) == prompts
