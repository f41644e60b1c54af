"""The Prefect surface of bench/secret_leaks.py: what an operator reads in the Prefect UI.

The planted records go through the real nightly flow on an in-process Prefect API (the
tests' harness), each night on a fresh database: `planted` with the LLM stage against the
scripted server's echo model, `outage` with the server answering 500 (its error quoting the
prompt it was sent, as proxies that echo a refused request do) so that runs are parked and
the flow run ends Failed, and `clean` on the same runs without the secrets (false-positive
redaction markers). After each night the Prefect client reads back every artifact of the
flow run and its tasks, every log of the flow run and its task runs, every state (name and
message) of the flow run and of each task run, the task runs' names, the flow run's name and
parameters, every result Prefect persisted, and the dead-letter listings of the CLI.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers.prefect_runs import RUN_PARTS, read_run
from tests.helpers.scripted_llm import Reply, ScriptedLLM

PARTS = (*RUN_PARTS, "results", "cli_dead_letters")


def outage_model(body: dict[str, Any], _n: int) -> Reply:
    """An LLM server that is down, and whose error quotes the request it refused."""
    return Reply(status=500, error="upstream model crashed on: " + body["messages"][-1]["content"])


@contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _cli_dead_letters() -> list[str]:
    from typer.testing import CliRunner

    from memory_cli.main import app

    runner = CliRunner()
    return [
        runner.invoke(app, ["dead-letters", *args]).output
        for args in (["list", "-f", "json"], ["list"], ["rejected", "-f", "json"], ["rejected"])
    ]


def _night(
    name: str,
    records: list[tuple[str, Any]],
    responder: Callable[[dict[str, Any], int], Reply],
    database: Callable[[Path], dict[str, str]],
    tmp: Path,
) -> dict[str, Any]:
    from flows.nightly import nightly
    from flows.params import NightlyParams
    from memory_core import db
    from memory_core.settings import Settings
    from tasks import runtime

    home = tmp / name
    (home / "input").mkdir(parents=True)
    # one file: the records' own ids name them (keys as an agent's runs would have)
    (home / "input" / "runs.json").write_text(json.dumps([r for _, r in records]))
    env = database(home / "data")
    with ScriptedLLM(responder) as llm, _env({
        **env,
        "HINDSIGHT_LLM__BASE_URL": llm.url,
        "HINDSIGHT_LLM__MODEL": "scripted-1",
        "HINDSIGHT_LLM__RETRY_DELAYS_S": "[0.05]",
        "HINDSIGHT_EMBEDDING__PROVIDER": "none",
    }):  # fmt: skip
        db.upgrade(Settings())
        state = nightly(NightlyParams(input=[str(home / "input")]), return_state=True)
        read = read_run(state.state_details.flow_run_id)
        read["cli_dead_letters"] = _cli_dead_letters()
        runtime.release_engines()
    read["_meta"] = [json.dumps({"state": state.name, "message": state.message,
                                 "llm_requests": len(llm.requests)})]  # fmt: skip
    return read


def read_prefect(
    nights: dict[str, tuple[list[tuple[str, Any]], Callable[[dict[str, Any], int], Reply]]],
    database: Callable[[Path], dict[str, str]],
) -> dict[str, dict[str, list[str]]]:
    """Each night (records, LLM responder) through the nightly flow on an in-process Prefect
    API; every text of each part of the Prefect surface, by night. `database` gives the
    HINDSIGHT_* variables of a fresh store in a folder."""
    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_LOCAL_STORAGE_PATH,
        temporary_settings,
    )
    from prefect.testing.utilities import prefect_test_harness

    tmp = Path(tempfile.mkdtemp())
    storage = tmp / "prefect-results"
    out: dict[str, dict[str, list[str]]] = {}
    with (
        prefect_test_harness(server_startup_timeout=120),
        temporary_settings({
            PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None, PREFECT_LOCAL_STORAGE_PATH: storage
        }),
    ):  # fmt: skip
        for name, (records, responder) in nights.items():
            before = set(storage.rglob("*")) if storage.exists() else set()
            out[name] = _night(name, records, responder, database, tmp)
            now = set(storage.rglob("*")) if storage.exists() else set()
            out[name]["results"] = _results_of(sorted(now - before))
    return out


def _results_of(files: list[Path]) -> list[str]:
    from prefect.results import ResultRecord

    texts = []
    for f in files:
        if not f.is_file():
            continue
        raw = f.read_bytes()
        try:
            texts.append(repr(ResultRecord.deserialize(raw).result))
        except (ValueError, TypeError, KeyError):  # not a record: read it as it is
            texts.append(raw.decode("utf-8", "replace"))
    return texts


def prefect_nights(
    planted: list[tuple[str, Any]], clean: list[tuple[str, Any]], pg: str | None, dbs: list[str]
) -> dict[str, dict[str, list[str]]]:
    """The planted night, the outage night and the clean night, each on a fresh store: SQLite
    in its folder, or (with `pg`, a server's address) a new PostgreSQL database named in
    `dbs` for the caller to drop."""
    from bench.secret_surfaces import echo_model

    def database(folder: Path) -> dict[str, str]:
        env = {"HINDSIGHT_DATA_DIR": str(folder)}
        if pg is None:
            return env
        import psycopg

        name = f"bench_secrets_prefect_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        dbs.append(name)
        return {**env, "HINDSIGHT_DATABASE_URL": f"{pg}/{name}"}

    nights = {
        "planted": (planted, echo_model),
        "outage": (planted, outage_model),
        "clean": (clean, echo_model),
    }
    return read_prefect(nights, database)


def prefect_report(
    nights: dict[str, dict[str, list[str]]],
    planted: list[dict[str, Any]],
    visible: Callable[[str, str], bool],
    marker: str,
    seconds: float,
) -> dict[str, Any]:
    """Per night and part of the Prefect surface: texts, bytes, redaction markers, secrets
    visible (for the clean night the markers are false positives)."""
    out: dict[str, Any] = {"seconds": seconds}
    for night, parts in nights.items():
        rep: dict[str, Any] = {"run": json.loads(parts["_meta"][0])}
        for part in PARTS:
            blob = "\n".join(parts[part])
            seen = [p["variant"] for p in planted if visible(p["secret"], blob)]
            rep[part] = {"texts": len(parts[part]), "bytes": len(blob),
                         "redaction_markers": blob.count(marker),
                         "secrets_visible": len(seen), "variants_visible": seen}  # fmt: skip
        out[night] = rep
    return out
