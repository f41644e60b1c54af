"""The `hindsight` command for tests: in this process where the test is not about the process.

A subprocess pays Python's start and every import (1.5-2 s of CPU a call, 10 s and more on a
busy machine), and the suite makes well over a hundred calls. Commands that run a flow (the
CLI's Prefect set-up is process-wide: environment, inline runs entered once), that start
services, or that a test runs with `process=True` still run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from tests.helpers.data import REPO

# always a flow run or a long-lived process (see memory_cli.pipeline, memory_cli.up)
_PROCESS_COMMANDS = {"nightly", "up", "deploy", "serve", "mcp", "ui"}
# stages that run as a flow when a Prefect API is configured (memory_cli.stages.in_process)
_STAGES = {"validate", "consolidate", "decay", "retrospect"}


def _needs_process(env: dict[str, str], args: tuple[str, ...]) -> bool:
    """True when the command would run a flow or start a service (memory_cli.stages)."""
    if not args or args[0] in _PROCESS_COMMANDS:
        return True
    stage = args[0] in _STAGES and (len(args) == 1 or args[1] != "report")
    if stage and env.get("PREFECT_API_URL"):
        return True
    # retrospect with an LLM runs as a flow: its LLM calls are tasks
    llm = env.get("HINDSIGHT_LLM__BASE_URL") or env.get("HINDSIGHT_LLM_BASE_URL")  # old name
    return args[0] == "retrospect" and bool(llm)


@contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """os.environ exactly as a subprocess given env would see it, for the call's length."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _engines_closed() -> Iterator[None]:
    """Close the pools of the engines the command made, as its exit would have: left to the
    garbage collector, PostgreSQL connections pile up over a session."""
    made: weakref.WeakSet[Engine] = weakref.WeakSet()

    def seen(conn: Any) -> None:
        made.add(conn.engine)

    event.listen(Engine, "engine_connect", seen)
    try:
        yield
    finally:
        event.remove(Engine, "engine_connect", seen)
        for engine in list(made):
            engine.dispose()


def _in_process(env: dict[str, str], args: tuple[str, ...], stdin: str | None) -> tuple:
    from memory_cli import context
    from memory_cli.main import app

    with _environ(env), _engines_closed():
        # exceptions propagate (not caught as exit code 1): a traceback fails the test loudly
        result = CliRunner().invoke(
            app, list(args), input=stdin, catch_exceptions=False, prog_name="hindsight"
        )
    # a command that took the flow path would leave Prefect's process-wide set-up behind
    assert not context._INLINE_RUNS.entered, f"{args}: runs a flow; add it to _PROCESS_COMMANDS"
    return result.exit_code, result.stdout, result.stderr


def hindsight(
    env: dict[str, str],
    *args: str,
    stdin: str | None = None,
    check: bool = True,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `hindsight args` with env as its whole environment; returncode, stdout, stderr."""
    if process or _needs_process(env, args):
        proc = subprocess.run(
            [sys.executable, "-m", "memory_cli", *args],
            cwd=REPO,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )
    else:
        code, out, err = _in_process(env, args, stdin)
        proc = subprocess.CompletedProcess(list(args), code, out, err)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def kill_at(env: dict[str, str], prefix: str, *args: str) -> None:
    """Run `hindsight args` as a process and SIGKILL it at the first line of its standard error
    that starts with `prefix` (a step it reports as done)."""
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith(prefix):
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the command ended before that line"
