"""Hindsight as a service: `hindsight up` starts a real `prefect server start` on a loopback
port, deploys, runs a process worker, the API and the MCP server; the nightly deployment is
triggered through the Prefect API and runs in the worker's own subprocess.

The tests share one `up` (about 20 s to start) and run in file order: the last one stops it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
)
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL, temporary_settings
from sqlalchemy import select
from sqlmodel import Session

from flows.report import DEAD_LETTER_KEY, SUMMARY_KEY
from memory_cli.processes import MARKER, marked_processes
from memory_core import db
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.card import Card
from memory_core.settings import Settings
from memory_core.status import trajectory_counts
from tests.helpers import fake_model
from tests.helpers.data import REPO
from tests.helpers.flows import failed_task_runs
from tests.helpers.net import WebhookSink, free_port, http_get, install_dead_letter_alert
from tests.helpers.scripted_llm import Reply, ScriptedLLM

BIN = Path(sys.executable).parent
POISON = "poison_probe"  # the tool name of the one trajectory the LLM refuses (HTTP 401)


@dataclass
class Ops:
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    prefect: str
    api: str
    mcp: str
    settings: Settings
    llm: ScriptedLLM
    refuse: list[bool]
    marker: str
    log: Path
    sink: WebhookSink = field(default_factory=WebhookSink)


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ops]:
    tmp = tmp_path_factory.mktemp("ops")
    settings = Settings(data_dir=tmp / "data", embedding={"provider": "none"})
    db.upgrade(settings)
    engine = db.make_engine(settings)
    ingest(
        engine=engine,
        records=iter_sources([str(REPO / "examples")]),
        namespace="default",
        task_type="default",
    )
    poison = {
        "id": "poison-1",
        "steps": [{"type": "tool_call", "tool": POISON, "error": "HTTP 503 busy"}],
    }
    ingest(
        engine=engine, records=iter([("poison", poison)]), namespace="default", task_type="default"
    )
    engine.dispose()

    refuse = [True]

    def responder(body: dict[str, Any], n: int) -> Reply:
        if refuse[0] and POISON in body["messages"][1]["content"]:
            return Reply(status=401, error="bad key")
        if "durable facts" in body["messages"][0]["content"]:
            return Reply(json.dumps({"facts": []}))  # fact extraction: nothing to remember
        return fake_model.respond(body, n)

    llm = ScriptedLLM(responder, api_key="sk-test").__enter__()  # a keyed endpoint
    ports = {name: free_port() for name in ("prefect", "api", "mcp")}
    marker = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HINDSIGHT_", "PREFECT_"))}
    env.update(
        {
            "HINDSIGHT_DATA_DIR": str(settings.data_dir),
            # keep the model's 6 s import out of every flow run
            "HINDSIGHT_EMBEDDING__PROVIDER": "none",
            "HINDSIGHT_LLM__BASE_URL": llm.url,
            "HINDSIGHT_LLM__MODEL": "scripted-1",
            "HINDSIGHT_LLM__API_KEY": "sk-test",
            "HINDSIGHT_LLM__MODE": "instead",
            "HINDSIGHT_LLM__RETRY_DELAYS_S": "[0.05]",
            "HINDSIGHT_LOG_FORMAT": "json",
            "PREFECT_HOME": str(tmp / "prefect"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_WORKER_QUERY_SECONDS": "1",
            MARKER: marker,
        }
    )
    log = tmp / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(BIN / "hindsight"),
                "up",
                "--prefect-port",
                str(ports["prefect"]),
                "--port",
                str(ports["api"]),
                "--mcp-port",
                str(ports["mcp"]),
            ],
            env=env,
            cwd=tmp,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    ready = "Ctrl-C stops everything"
    deadline = time.monotonic() + 150
    while ready not in log.read_text() and time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        time.sleep(0.5)
    assert ready in log.read_text(), log.read_text()
    host = "http://127.0.0.1"
    result = Ops(
        proc=proc,
        env=env,
        prefect=f"{host}:{ports['prefect']}",
        api=f"{host}:{ports['api']}",
        mcp=f"{host}:{ports['mcp']}",
        settings=settings,
        llm=llm,
        refuse=refuse,
        marker=marker,
        log=log,
    )
    with temporary_settings({PREFECT_API_URL: f"{result.prefect}/api"}):
        install_dead_letter_alert(result.sink.url)
        yield result
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(60)
    llm.__exit__(None, None, None)
    result.sink.server.shutdown()


def _artifacts(flow_run_id: uuid.UUID) -> dict[str, Any]:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found}


def test_ui_health_api_and_mcp_answer(ops: Ops) -> None:
    status, body = http_get(f"{ops.prefect}/api/health")
    assert status == 200 and json.loads(body) is True
    status, body = http_get(f"{ops.prefect}/")
    assert status == 200 and b"<html" in body.lower()  # the Prefect UI
    assert http_get(f"{ops.api}/healthz")[0] == 200
    status, body = http_get(f"{ops.api}/metrics")
    assert status == 200 and b"hindsight_http_requests_total" in body
    req = urllib.request.Request(f"{ops.mcp}/mcp", method="GET")
    with pytest.raises(urllib.error.HTTPError) as err:  # listening; MCP wants a session
        urllib.request.urlopen(req, timeout=5)
    assert 400 <= err.value.code < 500


def test_prefect_deploy_all_from_prefect_yaml(ops: Ops) -> None:
    env = {**ops.env, "PREFECT_API_URL": f"{ops.prefect}/api"}
    done = subprocess.run(
        [str(BIN / "prefect"), "--no-prompt", "deploy", "--all"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with get_client(sync_client=True) as client:
        deployments = {d.name: d for d in client.read_deployments()}
    assert set(deployments) >= {
        "nightly",
        "retrospect",
        "validate",
        "consolidate",
        "decay",
        "redrive-dead-letters",
    }
    nightly = deployments["nightly"]
    (sched,) = nightly.schedules
    assert sched.schedule.cron == "0 2 * * *" and sched.schedule.timezone == "UTC"
    assert nightly.work_pool_name == "hindsight-process" and "nightly" in nightly.tags


def test_nightly_deployment_runs_on_the_worker(ops: Ops) -> None:
    started = time.monotonic()
    run = run_deployment("nightly/nightly", timeout=150)
    took = time.monotonic() - started
    # one dead letter: the run is red and says what to do (every stage ran all the same)
    assert run.state is not None and run.state.is_failed(), (run.state, took)
    assert run.state.message == "1 dead letter: retry this run to re-drive them", run.state
    arts = _artifacts(run.id)
    assert SUMMARY_KEY in arts and DEAD_LETTER_KEY in arts
    rows = {r["metric"]: r["value"] for r in json.loads(arts[SUMMARY_KEY].data)}
    assert rows["trajectories retrospected"] == 13 and rows["dead letters"] == 1
    assert rows["cards created"] > 0 and rows["tokens sent"] > 0
    engine = db.make_engine(ops.settings)
    with Session(engine) as s:
        cards = list(s.execute(select(Card)).scalars())
    assert len([c for c in cards if c.kind == "experience"]) == rows["cards created"]
    assert len({c.signature for c in cards if c.kind == "experience"}) == rows["cards created"]
    assert trajectory_counts(engine=engine) == {"done": 12, "dead_letter": 1}
    engine.dispose()
    # the dead letter is a failed task run, with its error, on the nightly run's page
    (failed,) = failed_task_runs(run.id, expect=1)
    assert failed.name.startswith("llm-extract ")
    assert "401" in (failed.state.message or "") or "LLMRefused" in (failed.state.message or "")
    # HINDSIGHT_LOG_FORMAT=json: the flow run's process logs JSON lines with run and batch ids
    lines = (ops.settings.data_dir / "logs" / "worker.log").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.startswith('{"time"')]
    mine = [e for e in events if e.get("flow_run_id") == str(run.id)]
    assert any("batch" in e and "task_run_id" in e for e in mine), lines[-20:]
    # the automation of deploy/dead-letter-alert.yaml told someone, once
    deadline = time.monotonic() + 30
    while not ops.sink.received and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(ops.sink.received) == 1, ops.sink.received
    assert "llm-extract" in ops.sink.received[0] and "401" in ops.sink.received[0]
    print(f"nightly through the worker: {took:.1f} s")


def test_dead_letter_is_redriven_by_its_deployment(ops: Ops) -> None:
    ops.refuse[0] = False  # the cause is fixed (say, the key was replaced)
    run = run_deployment("redrive-dead-letters/redrive-dead-letters", timeout=120)
    assert run.state is not None and run.state.is_completed(), run.state
    engine = db.make_engine(ops.settings)
    assert trajectory_counts(engine=engine) == {"done": 13}
    engine.dispose()


def test_ctrl_c_stops_every_service(ops: Ops) -> None:
    children = marked_processes(ops.marker)
    assert len(children) >= 4  # server, worker, API, MCP (and their helpers)
    started = time.monotonic()
    os.killpg(ops.proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal sends
    assert ops.proc.wait(60) == 0, ops.log.read_text()
    took = time.monotonic() - started
    assert "all services stopped" in ops.log.read_text()
    assert marked_processes(ops.marker) == [], "orphans left behind"
    print(f"stopped {len(children)} processes in {took:.1f} s")
