"""No orphans: a `hindsight` command killed with SIGKILL leaves no child process running
(Prefect's embedded API server used to live on under init, ~190 MB each)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

BIN = Path(sys.executable).parent / "hindsight"


def _command_env(env_for: dict[str, str], tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in env_for.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")  # its own embedded server, not the harness
    return env


def _descendants_until(proc: subprocess.Popen[bytes], needle: str, timeout_s: float) -> dict:
    """Every descendant seen until one whose command line holds needle is running."""
    me, seen = psutil.Process(proc.pid), {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the command ended before it could be killed"
        for child in me.children(recursive=True):
            seen[child.pid] = child
        if any(needle in " ".join(_cmdline(c)) for c in seen.values()):
            return seen
        time.sleep(0.1)
    pytest.fail(f"no {needle} child within {timeout_s:.0f} s")


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _alive(procs: dict, timeout_s: float) -> list[str]:
    """Command lines of those still running after timeout_s (zombies count as gone)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [p for p in procs.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            return [" ".join(_cmdline(p))[:100] for p in alive]
        time.sleep(0.2)


def _up(tmp_path: Path) -> list[str]:
    from tests.helpers.net import free_port

    ports = [str(free_port()) for _ in range(3)]
    return ["up", "--prefect-port", ports[0], "--port", ports[1], "--mcp-port", ports[2]]


# what each command starts, and the child that shows it is all running: with an LLM
# configured the nightly and retrospect run as flows (Prefect's temporary server; without one
# they run in process and start none); `up` starts the Prefect server, a worker, the API and
# the MCP server
LLM = {"HINDSIGHT_LLM__BASE_URL": "http://127.0.0.1:9/v1", "HINDSIGHT_LLM__MODEL": "m"}
KILLED = {
    "nightly with an LLM": (lambda tmp: ["nightly"], LLM, "uvicorn"),
    "retrospect with an LLM": (lambda tmp: ["retrospect"], LLM, "uvicorn"),
    "up": (_up, {}, "worker start"),
}


@pytest.mark.parametrize("command", list(KILLED))
def test_sigkill_of_a_command_leaves_no_child(env_for, tmp_path, command) -> None:
    args, extra, needle = KILLED[command]
    proc = subprocess.Popen(
        [str(BIN), *args(tmp_path)],
        env={**_command_env(env_for, tmp_path), **extra},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: dict = {}
    try:
        seen = _descendants_until(proc, needle, timeout_s=240)
        assert any("memory_cli.watchdog" in " ".join(_cmdline(p)) for p in seen.values())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        left = _alive(seen, timeout_s=15)
    finally:
        # never leave one to the next test; only the command's own descendants: this process
        # has other children (the session's Prefect test server) the next tests need
        for p in seen.values():
            if p.pid != proc.pid and p.is_running():
                p.kill()
    assert left == [], f"still running after SIGKILL: {left}"


def test_a_normal_exit_leaves_no_child_either(env_for, tmp_path) -> None:
    env = _command_env(env_for, tmp_path)
    proc = subprocess.Popen(
        [str(BIN), "decay", "--dry-run"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    seen = _descendants_until(proc, "memory_cli.watchdog", timeout_s=30)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out.decode()
    assert _alive(seen, timeout_s=15) == []
