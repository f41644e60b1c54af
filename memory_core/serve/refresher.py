"""Feed reads of the namespaces answered inline, in a thread of their own, as they fall due.

A warm plain query is answered on the event loop only while its snapshot was checked against
the change feed within the refresh interval (memory_core/serve/inline.py). Left to requests,
the first query after each interval found the check due and went down the route to a worker
thread, and so did every query until that thread's feed read was done: under wrk at 5,000
cards, a burst of route-and-thread requests every second (each several times a hot one), in
the p99. This thread reads the feed when it falls due and tells the gate a read is under way,
so queries stay inline meanwhile, serving what the snapshot holds, as the worker threads
already did while one of them read the feed.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy.exc import SQLAlchemyError

from memory_core.serve.inline import InlineGate
from memory_core.serve.snapshot_cache import SnapshotCache

log = logging.getLogger(__name__)
RETRY_S = 0.01  # a read another thread holds (its lock): look again this much later


class FeedRefresher:
    """Reads the feed for each inline namespace when its check falls due."""

    def __init__(self, *, snapshots: SnapshotCache, gate: InlineGate, idle_s: float) -> None:
        self.snapshots = snapshots
        self.gate = gate
        self.idle_s = idle_s  # the longest sleep (no namespace inline yet)
        self.reads = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="feed-refresher", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def refresh_due(self) -> float:
        """Read the feed for every inline namespace now due; returns the seconds until the
        next one falls due."""
        wait = self.idle_s
        for left, namespace in self.gate.due():
            if left > 0:
                wait = min(wait, left)
            elif self.snapshots.ready(namespace):  # never a load: an evicted one stays out
                self._refresh(namespace)
                wait = RETRY_S  # checked again soon: its read may have been another thread's
        return wait

    def _refresh(self, namespace: str) -> None:
        self.gate.refreshing.add(namespace)
        try:
            self.snapshots.get(namespace)
            self.reads += 1
        finally:
            self.gate.refreshing.discard(namespace)

    def _run(self) -> None:
        while True:
            try:
                wait = self.refresh_due()
            except SQLAlchemyError as exc:  # the database is down: requests read it themselves
                log.warning("refreshing snapshots failed: %s", exc)
                wait = self.idle_s
            if self._stop.wait(max(wait, RETRY_S)):
                return
