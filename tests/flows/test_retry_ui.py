"""The Prefect UI's Retry on a failed nightly run: a real `prefect server start` and process
worker (`hindsight up`), a keyed scripted LLM that goes down and comes back.

Outage -> the nightly deployment's run ends Failed ("N dead letters: retry this run to re-drive
them"), every rule lesson stored -> the LLM is back -> `prefect flow-run retry <id>` (what the
Retry button does) -> the same flow run re-drives what it parked, runs every stage again and
ends Completed, with the cards of a run that never saw the outage.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    LogFilter,
    LogFilterFlowRunId,
)
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL, temporary_settings
from sqlalchemy import select
from sqlmodel import Session

from flows.report import SUMMARY_KEY
from memory_core import db
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.card import Card
from memory_core.retrospect.dead_letters import dead_parts, list_dead_letters
from memory_core.settings import Settings
from memory_core.status import trajectory_counts
from tests.helpers import fake_model
from tests.helpers.data import REPO
from tests.helpers.flows import failed_task_runs
from tests.helpers.net import free_port
from tests.helpers.scripted_llm import Reply, ScriptedLLM

BIN = Path(sys.executable).parent
KEY = "sk-retry-test"


def _responder(outage: list[bool]):
    def respond(body: dict[str, Any], n: int) -> Reply:
        if outage[0]:
            return Reply(status=503, error="model server down")
        if "durable facts" in body["messages"][0]["content"]:
            return Reply(json.dumps({"facts": []}))
        return fake_model.respond(body, n)

    return respond


def _env(settings: Settings, llm: ScriptedLLM, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HINDSIGHT_", "PREFECT_"))}
    env.update(
        {
            "HINDSIGHT_DATA_DIR": str(settings.data_dir),
            # the embeddings endpoint checks the key too: consolidation on the worker uses it
            "HINDSIGHT_EMBEDDING__PROVIDER": "openai",
            "HINDSIGHT_EMBEDDING__BASE_URL": llm.url,
            "HINDSIGHT_EMBEDDING__MODEL": "scripted-embed",
            "HINDSIGHT_EMBEDDING__API_KEY": KEY,
            "HINDSIGHT_LLM__BASE_URL": llm.url,
            "HINDSIGHT_LLM__MODEL": "scripted-1",
            "HINDSIGHT_LLM__API_KEY": KEY,
            "HINDSIGHT_LLM__RETRY_DELAYS_S": "[0.05]",
            "PREFECT_HOME": str(tmp / "prefect"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_WORKER_QUERY_SECONDS": "1",
        }
    )
    if settings.database_url:
        env["HINDSIGHT_DATABASE_URL"] = settings.database_url
    return env


def _cards(settings: Settings) -> set[tuple[str, str, str]]:
    engine = db.make_engine(settings)
    with Session(engine) as s:
        rows = s.execute(select(Card.kind, Card.status, Card.signature)).all()
    engine.dispose()
    return {(k, st, sig or "") for k, st, sig in rows}


def _summary_rows(flow_run_id: uuid.UUID) -> list[dict[str, Any]]:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    tables = sorted((a for a in found if a.key == SUMMARY_KEY), key=lambda a: a.created)
    return [{r["metric"]: r["value"] for r in json.loads(a.data)} for a in tables]


def _run_logs(flow_run_id: uuid.UUID, timeout_s: float = 60.0) -> list[str]:
    """Every log line of the flow run, as its page in the UI shows them, once the run's
    process has sent its last ones (its final state's line, then a few seconds more)."""

    def read() -> list[str]:
        with get_client(sync_client=True) as client:
            logs = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])),
                limit=200,
            )
        return [x.message for x in logs]

    deadline = time.monotonic() + timeout_s
    while not any("Finished in state" in x for x in read()) and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(5)  # the engine's own report of the end comes after that line
    lines = read()
    assert any("Finished in state" in x for x in lines), lines[-5:]
    return lines


def _wait_for_retry(flow_run_id: uuid.UUID, timeout_s: float = 240.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(flow_run_id)
        if run.run_count >= 2 and run.state is not None and run.state.is_final():
            return run
        time.sleep(1)
    raise AssertionError(f"the retried run did not finish: {run.state}")


_REFERENCE: list[set[tuple[str, str, str]]] = []  # made once: both params compare with it


def _reference(env: dict[str, str], tmp: Path, monkeypatch) -> set[tuple[str, str, str]]:
    """The same data through a nightly run that never saw the outage (in process, on the
    session's test Prefect API, on SQLite whatever the param)."""
    if _REFERENCE:
        return _REFERENCE[0]
    from flows.nightly import nightly
    from flows.params import NightlyParams

    ref = Settings(data_dir=tmp / "ref", embedding={"provider": "none"})
    db.upgrade(ref)
    for k, v in env.items():
        if k.startswith("HINDSIGHT_"):
            monkeypatch.setenv(k, v)
    monkeypatch.setenv("HINDSIGHT_DATA_DIR", str(ref.data_dir))
    monkeypatch.delenv("HINDSIGHT_DATABASE_URL", raising=False)
    state = nightly(NightlyParams(input=[str(REPO / "examples")]), return_state=True)
    assert state.is_completed(), state.message
    _REFERENCE.append(_cards(ref))
    return _REFERENCE[0]


def test_retry_in_the_ui_recovers_the_night(
    settings, tmp_path, monkeypatch, prefect_harness
) -> None:
    settings = Settings(
        data_dir=settings.data_dir,
        database_url=settings.database_url,
        embedding={"provider": "none"},
    )
    engine = db.make_engine(settings)
    ingest(
        engine=engine,
        records=iter_sources([str(REPO / "examples")]),
        namespace="default",
        task_type="default",
    )
    outage = [True]
    llm = ScriptedLLM(_responder(outage), api_key=KEY).__enter__()
    env = _env(settings, llm, tmp_path)
    port = free_port()
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(BIN / "hindsight"),
                "up",
                "--prefect-port",
                str(port),
                "--port",
                str(free_port()),
                "--mcp-port",
                str(free_port()),
            ],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300  # a loaded 2-core machine: the server is slow
        while "Ctrl-C stops everything" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.5)
        assert "Ctrl-C stops everything" in log.read_text(), log.read_text()[-3000:]
        api = f"http://127.0.0.1:{port}/api"
        env["PREFECT_API_URL"] = api
        deployed = subprocess.run(
            [str(BIN / "prefect"), "--no-prompt", "deploy", "--name", "nightly"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        with temporary_settings({PREFECT_API_URL: api}):
            # the outage: rule lessons stored, the LLM part of each run parked, the run red
            run = run_deployment("nightly/nightly", timeout=240)
            assert run.state is not None and run.state.is_failed(), run.state
            message = run.state.message or ""
            assert message.endswith("dead letters: retry this run to re-drive them"), message
            counts = trajectory_counts(engine=engine)
            parked = counts["dead_letter"]
            assert parked > 0 and counts.get("done", 0) + parked == 12
            # every part the run parked: a run's retrospection and, for runs the facts stage
            # could not ask the LLM about, its facts
            parts = sum(
                len(dead_parts(r, run_id=str(run.id)))
                for r in list_dead_letters(engine=engine, run_id=str(run.id))
            )
            assert parts >= parked
            runs_parked = len(list_dead_letters(engine=engine, run_id=str(run.id), limit=None))
            assert int(message.split()[0]) == runs_parked
            rules_only = _cards(settings)
            assert any(k == "experience" for k, _, _ in rules_only)
            [first] = _summary_rows(run.id)
            assert first["dead letters"] == int(message.split()[0])
            # the failed calls are counted, with why (each parked run's tries, at the least)
            assert first["LLM calls failed"] >= parked, first
            assert "LLMTransient" in first["LLM failures, by error"], first
            # a failed night is the run's own message: no engine exception in its logs
            engine_errors = [
                x for x in _run_logs(run.id) if "Engine execution" in x or "Unexpected result" in x
            ]
            assert engine_errors == [], engine_errors[:1]
            # the LLM is back; the operator presses Retry
            outage[0] = False
            retried = subprocess.run(
                [str(BIN / "prefect"), "flow-run", "retry", str(run.id)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert retried.returncode == 0, retried.stdout + retried.stderr
            again = _wait_for_retry(run.id)
            assert again.state.is_completed(), again.state
            assert trajectory_counts(engine=engine) == {"done": 12}
            rows = _summary_rows(run.id)
            assert len(rows) == 2, rows
            # dead letters are counted by run everywhere: the message, the summary, the Retry
            assert rows[-1]["re-driven by this retry"] == runs_parked
            assert rows[-1]["recovered by this retry"] == runs_parked
            assert rows[-1]["dead letters"] == 0
            # what failed stays visible: the first attempt's failed llm-extract task runs
            failed = failed_task_runs(run.id, expect=parked)
            assert len(failed) >= parked and all(t.name.startswith("llm-extract") for t in failed)
            after = _cards(settings)
            # the keys reached the worker as given: chat and embeddings, none refused
            assert llm.unauthorized == [], llm.unauthorized[:3]
            assert llm.embed_requests and llm.requests
        # outside the block: the reference runs on the session's test Prefect API, which
        # outlives this test, not on the `up` server stopped below
        reference = _reference(env, tmp_path, monkeypatch)
        assert after == reference, after ^ reference
        assert rules_only < after  # the LLM cards came on the retry
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(60)
        llm.__exit__(None, None, None)
        engine.dispose()
