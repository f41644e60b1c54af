"""The change feed read in a thread of its own, so that queries do not pay for it.

A query whose snapshot was last brought current more than the refresh interval ago reads the
feed and applies its namespace's changes first (serve/snapshot_cache.py): at 100k cards under
steady feedback that was 10-30 ms, once a second, on whichever query came due: most of the
in-process tail. While queries arrive, this thread does it every half interval instead, so a
query finds its snapshot current and a changed card is still served within the interval.

It stops after IDLE_S without a query (the next query then catches up itself and starts it
again), when the cache is closed, or when the cache is gone: a server left idle does
not poll its database forever, and a test's cache takes its thread with it.

Layer: cache.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Protocol

from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)
IDLE_S = 60.0  # no query this long: the thread ends
_LIVE: weakref.WeakSet[FeedPoller] = weakref.WeakSet()  # every poller not collected yet


class CatchesUp(Protocol):
    """What the poller drives: a cache of snapshots (serve/snapshot_cache.py)."""

    def catch_up_all(self, *, older_than_s: float) -> int: ...


class FeedPoller:
    """Brings a cache's snapshots current every half refresh interval while it is queried."""

    def __init__(self, cache: CatchesUp, refresh_s: float) -> None:
        self._cache = weakref.ref(cache)
        self.every_s = refresh_s / 2
        self.queried_at = time.monotonic()
        self.rounds = 0  # rounds that brought snapshots current (tests, metrics)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        _LIVE.add(self)

    def queried(self) -> None:
        """A query came: note it, and start the thread when it is not running."""
        self.queried_at = time.monotonic()
        if self._thread is not None or self._stop.is_set():
            return
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="feed-poller", daemon=True)
                self._thread.start()

    def close(self) -> None:
        """Stop the thread and wait for it (it stays stopped)."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        failing = False
        try:
            while not self._stop.wait(self.every_s):
                cache = self._cache()
                if cache is None or time.monotonic() - self.queried_at > IDLE_S:
                    return
                try:
                    done = cache.catch_up_all(older_than_s=self.every_s)
                except SQLAlchemyError as exc:  # the database is down: queries serve what is held
                    if not failing:  # once per outage, not every round
                        log.warning("reading the card change feed failed: %s", exc)
                    failing = True
                else:
                    failing = failing and not done  # a round that read nothing proves nothing
                    self.rounds += done > 0
                del cache  # not held while waiting: a cache nobody holds is collected
        finally:
            with self._lock:
                self._thread = None


def close_all() -> None:
    """Stop every poller of this process (a test's end: its caches poll nothing after it)."""
    for poller in list(_LIVE):
        poller.close()
