"""Snapshot upkeep in daemon threads, one per key at a time: reloads, fingerprint checks,
saves of snapshot files and feed pruning run off the query path, and a key already running is
not started twice (a query finding a reload due every time would start one each).

Layer: cache.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)


class UpkeepThreads:
    """Keyed daemon threads; len() is how many run now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._idle = threading.Condition(self._lock)

    def __len__(self) -> int:
        return len(self._running)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until none runs (a process about to fork); False when timeout passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._running, timeout)

    def start(self, key: str, task: Callable[[str], object]) -> None:
        """Run task(key) in a thread unless one of this key runs; a database error is logged
        (the next query or check tries again)."""
        with self._lock:
            if key in self._running:
                return
            self._running.add(key)

        def run() -> None:
            try:
                task(key)
            except SQLAlchemyError as exc:
                log.warning("snapshot upkeep of %r failed: %s", key, exc)
            finally:
                with self._lock:
                    self._running.discard(key)
                    self._idle.notify_all()

        threading.Thread(target=run, name=f"snapshot-{key}", daemon=True).start()
