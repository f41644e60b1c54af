"""Child processes of `hindsight up`: each service in its own process group with a log,
stopped together; HTTP readiness checks."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from memory_core.errors import HindsightError

MARKER = "HINDSIGHT_UP_ID"  # in every child's environment: finds the flow runs it started


class StartFailed(HindsightError):
    """A service did not come up."""


@dataclass
class Child:
    """One service: its process (own process group) and its log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    _file: IO[bytes] = field(repr=False)


@dataclass
class Services:
    """The started services, stopped in reverse order."""

    env: dict[str, str]
    logs: Path
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, argv: list[str]) -> Child:
        """Start one service in a new session (Ctrl-C in the terminal reaches only `up`)."""
        log = self.logs / f"{name}.log"
        handle = log.open("ab")
        proc = subprocess.Popen(
            argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        child = Child(name, proc, log, handle)
        self.children.append(child)
        return child

    def exited(self) -> Child | None:
        """A service that stopped by itself, if any."""
        return next((c for c in self.children if c.proc.poll() is not None), None)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to each process group (last started first), SIGKILL after the grace time;
        then whatever still carries this run's marker (flow runs in their own sessions)."""
        for child in reversed(self.children):
            _signal_group(child.proc.pid, signal.SIGTERM)
            try:
                child.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(child.proc.pid, signal.SIGKILL)
                child.proc.wait()
            # the group may outlive its leader (a server's own children)
            _signal_group(child.proc.pid, signal.SIGKILL)
            child._file.close()
        for pid in marked_processes(self.env[MARKER]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def marked_processes(marker: str, *, var: str = MARKER) -> list[int]:
    """Processes whose environment carries var=marker (Linux /proc; else none)."""
    needle = f"{var}={marker}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return [pid for pid in found if pid != os.getpid()]


def wait_http(
    url: str,
    *,
    timeout_s: float,
    child: Child | None = None,
    stop: list[int] | None = None,
    any_status: bool = False,
) -> float:
    """Seconds until GET url answers 200 (any HTTP status with any_status), or a stop was
    asked for; StartFailed when the child dies or time runs out."""
    import urllib.error  # here: every command imports this module (the watchdog)
    import urllib.request

    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if stop:
            break
        if child is not None and child.proc.poll() is not None:
            raise StartFailed(f"{child.name} exited ({child.proc.returncode}); see {child.log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    break
        except urllib.error.HTTPError:
            if any_status:
                break
        except (urllib.error.URLError, OSError):
            pass  # not listening yet
        time.sleep(0.25)
    else:
        raise StartFailed(f"{url} did not answer within {timeout_s:.0f} s")
    return time.monotonic() - start
