"""The night on a busy host: with no Prefect API configured, `hindsight nightly` runs its
stages in its own process (no temporary server to wait for), and a temporary server that
does not come up in time is one line naming the setting, never a traceback. Real
subprocesses on SQLite and PostgreSQL, with two busy loops beside them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.helpers.data import REPO, tau_path, tau_runs


@contextmanager
def busy_loops(n: int = 2) -> Iterator[list[subprocess.Popen[bytes]]]:
    """n processes spinning a core each, for the length of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}  # no server configured
    return subprocess.run(
        [sys.executable, "-m", "memory_cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def test_nightly_on_a_loaded_host_runs_in_process_to_the_end(env_for, settings) -> None:
    """The airline runs (the shared data, not a smaller stand-in: a missing copy is an error
    naming how to fetch it), with both loops spinning from before the start to the end."""
    source, runs = tau_path(), len(tau_runs())
    with busy_loops(2) as loops:
        proc = _run(env_for, "nightly", "--input", str(source), "-f", "json")
        assert all(p.poll() is None for p in loops)  # the host stayed loaded throughout
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "temporary server" not in proc.stderr
    summary = json.loads(proc.stdout)
    (ingested,) = summary["ingested"]
    assert ingested["stored"] + ingested["duplicates"] == runs and ingested["refused"] == []
    assert summary["retrospect"]["trajectories"] == ingested["stored"]
    assert summary["validation"]["evaluated"] > 0
    assert summary["outcome"]["failures"] == [] and summary["outcome"]["dead_letters"] == []
    # no Prefect home was made: no temporary server, no flow run database
    assert not (settings.data_dir / "prefect").exists()


def test_a_temporary_server_that_does_not_start_is_one_line(env_for, settings) -> None:
    """An LLM retrospect runs as a flow (its calls are tasks): with no API configured Prefect
    starts a temporary server; one that misses its start-up time is said in one line."""
    env = {
        **env_for,
        "HINDSIGHT_LLM__BASE_URL": "http://127.0.0.1:9/v1",
        "HINDSIGHT_LLM__MODEL": "m",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "0",
    }
    proc = _run(env, "retrospect")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" in line
    assert "PREFECT_API_URL" in line
