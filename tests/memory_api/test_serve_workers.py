"""`hindsight serve --workers 2`: workers forked from a process that loaded the snapshots share
its pages, serve cards written after the fork, are replaced when one dies, and stop with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.helpers.data import REPO
from tests.helpers.net import free_port
from tests.helpers.serve import add_card, keys_for

STATE = {"tool": "search", "retry_count": 1}
LATER = {"tool": "later"}  # only the card written after the fork holds on it


def _workers(parent: int) -> list[int]:
    """The server's API workers: its children other than the watchdog."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"watchdog" not in cmdline:
            out.append(int(entry.name))
    return sorted(out)


def _kb(pid: int, *fields: str) -> int:
    """The sum of some `Field: N kB` lines of a process's smaps_rollup."""
    lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    return sum(int(line.split()[1]) for line in lines if line.split(":")[0] in fields)


def _scenarios(base: str, key: str, state: dict | None = None) -> set[str]:
    """The scenarios one query answers, on a connection of its own (any worker may take it)."""
    r = httpx.post(
        base + "/v1/cards/query",
        json={"task_state": state or STATE},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return {hit["card"]["scenario"] for hit in r.json()["cards"]}


def _until(check, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.2)


def test_forked_workers_share_pages_follow_writes_and_stop(engine, env_for) -> None:
    for i in range(300):  # enough cards that a snapshot held twice would show in the pages
        add_card(engine, scenario=f"card {i}", preconditions=["retry_count >= 1"])
    key = keys_for(engine)["read"]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_cli", "serve", "--port", str(port), "--workers", "2"],
        cwd=REPO,
        env=env_for,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def up() -> bool:
            assert proc.poll() is None, "the server ended"
            try:
                return httpx.get(base + "/healthz", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        _until(up)
        workers = _workers(proc.pid)
        assert len(workers) == 2, workers
        for _ in range(20):
            assert len(_scenarios(base, key)) > 0
        # a spawned worker's pages are its own (private ~85% of its RSS); a forked one keeps
        # sharing the parent's modules and snapshot
        for pid in workers:
            private = _kb(pid, "Private_Clean", "Private_Dirty")
            assert private < _kb(pid, "Rss") / 2, (pid, private, _kb(pid, "Rss"))

        # written after the fork: each worker's copy of the snapshot catches up from the feed
        add_card(engine, scenario="written later", preconditions=['tool == "later"'])
        _until(lambda: all(_scenarios(base, key, LATER) == {"written later"} for _ in range(6)))

        os.kill(workers[0], signal.SIGKILL)
        _until(lambda: len(_workers(proc.pid)) == 2 and workers[0] not in _workers(proc.pid))
        workers += _workers(proc.pid)
        _until(lambda: all(_scenarios(base, key, LATER) == {"written later"} for _ in range(6)))
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]  # none left behind
