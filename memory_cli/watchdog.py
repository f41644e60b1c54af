"""No orphans: a small process that outlives a `hindsight` command only to clean up after it.

Prefect starts its embedded API server (uvicorn) as a child and stops it at exit; a SIGKILL
skips that, and the server lived on under init (~190 MB each, 53 of 97 kills). Neither a
parent-death signal (Prefect's Popen is not ours to change, and PR_SET_PDEATHSIG fires when
the spawning *thread* ends) nor a process group (a command run by another program shares its
group) covers every child, so each command stamps its environment with a fresh id that every
descendant inherits, and starts this watchdog holding the read end of a pipe. When the command
is gone, however it died, the pipe reads EOF, and the watchdog stops every process that
carries the id: SIGTERM, then SIGKILL after a grace time.

    python -m memory_cli.watchdog ID   (stdin: the pipe; started by `start`)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid

from memory_cli.processes import marked_processes

OWNER = "HINDSIGHT_COMMAND_ID"  # in the environment of every process a command starts
GRACE_S = 3.0


class _Started:
    proc: subprocess.Popen[bytes] | None = None


_STARTED = _Started()


def start() -> None:
    """Stamp this process's environment and start its watchdog (once per process)."""
    if _STARTED.proc is not None or not sys.platform.startswith("linux"):
        return  # the sweep reads /proc
    os.environ[OWNER] = uuid.uuid4().hex
    _STARTED.proc = subprocess.Popen(
        [sys.executable, "-m", "memory_cli.watchdog", os.environ[OWNER]],
        stdin=subprocess.PIPE,  # only we hold the write end (Popen closes fds in children)
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or a kill of our group must not take it first
    )


def sweep(marker: str) -> list[int]:
    """Stop every process carrying the marker; the pids that were found."""
    found = marked_processes(marker, var=OWNER)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and marked_processes(marker, var=OWNER):
        time.sleep(0.1)
    # a second look also catches a child started while the first one was being stopped
    for pid in marked_processes(marker, var=OWNER):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return found


def main(marker: str) -> None:
    """Wait for EOF on stdin (the command is gone), then sweep."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is for the command
    while sys.stdin.buffer.read(4096):
        pass
    sweep(marker)


if __name__ == "__main__":
    main(sys.argv[1])
