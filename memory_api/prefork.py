"""`hindsight serve --workers N`: one process imports the code, builds the app and loads the keyed
namespaces' snapshots, then forks N workers that share those pages copy-on-write.

uvicorn's own workers are spawned: each imports everything and loads every snapshot again, and
its supervisor built an app it never served (at 5,000 cards each worker added ~240 MB). Forked,
a worker starts with the parent's modules and snapshots in place; the objects are frozen out of
the collector first (gc.freeze), so its passes do not write to every shared page. A worker
still copies the pages its queries touch (reference counts) and what it changes (the feed's
changes, its row cache). The parent serves nothing and runs no thread: it forwards a stop to
its workers, and forks a new worker when one dies.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import socket
import time
from types import FrameType

import uvicorn
from fastapi import FastAPI

from memory_core.serve.keys import keyed_namespaces
from memory_core.serve.service import MemoryService

log = logging.getLogger(__name__)
STOP_S = 30.0  # a worker still up this long after the stop is killed
_STOPS = (signal.SIGINT, signal.SIGTERM)


def preload(service: MemoryService) -> int:
    """Load the snapshots of the namespaces keys read (within the cache's budget) and close the
    database connections the loads opened (a forked worker must not share them); the cards held."""
    held = service.snapshots.preload(keyed_namespaces(service.engine))
    service.engine.dispose()
    return held


def serve_forked(app: FastAPI, service: MemoryService, *, workers: int, **config: object) -> None:
    """Run `workers` forked uvicorn servers of `app` on one socket until SIGINT or SIGTERM."""
    cfg = uvicorn.Config(app, **config)  # type: ignore[arg-type]
    cfg.load()  # the app's wrapping and uvicorn's protocol modules, before the fork
    sock = cfg.bind_socket()
    preload(service)
    gc.collect()
    gc.freeze()  # what lives now is shared: the collector must not write to its pages
    alive: set[int] = set()
    stopping = False

    def stop(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in _STOPS}
    try:
        alive |= {_fork(cfg, sock) for _ in range(workers)}
        while not stopping:
            time.sleep(0.2)  # polled: a signal's handler then only sets a flag
            for pid in _ended(alive):  # the workers only: the process has other children
                log.warning("API worker %d ended; forking another", pid)
                time.sleep(0.5)  # a worker failing at start must not spin the parent
                alive.add(_fork(cfg, sock))
    finally:
        for pid in alive:
            _kill(pid, signal.SIGTERM)
        _reap(alive)
        for s, handler in previous.items():
            signal.signal(s, handler)
        sock.close()


def _fork(cfg: uvicorn.Config, sock: socket.socket) -> int:
    """A worker process serving on the shared socket; its pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        # the parent's handlers act on its workers; uvicorn puts its own in place
        for s in _STOPS:
            signal.signal(s, signal.SIG_IGN)
        uvicorn.Server(cfg).run(sockets=[sock])
        code = 0
    finally:
        os._exit(code)  # never back into the parent's code


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
        os.kill(pid, sig)


def _ended(alive: set[int]) -> list[int]:
    """The workers that ended (reaped, and taken out of `alive`)."""
    ended = []
    for pid in list(alive):
        try:
            done = os.waitpid(pid, os.WNOHANG)[0] != 0
        except ChildProcessError:  # reaped already
            done = True
        if done:
            alive.discard(pid)
            ended.append(pid)
    return ended


def _reap(alive: set[int]) -> None:
    """Wait for the workers still up, killing those that outlive STOP_S."""
    deadline = time.monotonic() + STOP_S
    while alive:
        _ended(alive)
        if alive and time.monotonic() > deadline:
            for pid in alive:
                _kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.05)
