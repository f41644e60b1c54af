"""Held snapshots kept current from the change feed (the catch-up half of
serve/snapshot_cache.py): one read of the feed hands each namespace its changes, a namespace
applies its own by reading those cards alone, and a periodic check compares what is served
with the database's fingerprint, reloading only when they disagree.

Layer: cache.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from memory_core.db import read_session
from memory_core.serve.changes import fingerprint, prune, rows_by_id
from memory_core.serve.feed import FeedReader
from memory_core.serve.snapshot import Snapshot
from memory_core.serve.upkeep_threads import UpkeepThreads

log = logging.getLogger(__name__)
PRUNE_S = 600.0  # how often the feed is pruned
VERIFY_TRIES = 10


class FeedCatchUp:
    """The change feed's side of SnapshotCache (its state is set up there)."""

    _engine: Engine
    _refresh_s: float
    _snapshots: OrderedDict[str, Snapshot]
    _lock: threading.Lock
    _loading: dict[str, threading.Lock]
    _background: UpkeepThreads
    _pruned_at: float
    _feed: FeedReader
    _pending: dict[str, dict[uuid.UUID, int]]
    _must_reload: set[str]
    on_change: Callable[[Snapshot, list[uuid.UUID]], None] | None
    on_keys: Callable[[], None] | None  # a read found keys revoked or deleted
    applied: int
    _reload: Callable[[str], None]  # SnapshotCache's: a whole reload of the namespace

    def _catch_up(
        self, snap: Snapshot, *, wait: bool, feed_s: float | None = None, refill: bool = False
    ) -> bool:
        """Read the feed when due (or the snapshot is stale), then apply this namespace's
        changes. Without `wait`, a snapshot or feed another thread holds is served as it is.
        True when a change was applied. feed_s: the feed is read when last read this long
        ago (the refresh interval by default); refill: on_change is called (not on a query)."""
        if not snap.lock.acquire(blocking=wait):
            return False
        try:
            now = time.monotonic()
            # a stale snapshot needs a read that started after its write committed
            due = self._refresh_s if feed_s is None else feed_s
            if snap.stale or now - self._feed.read_at >= due:
                if self._feed.lock.acquire(blocking=wait):
                    try:
                        self._read_feed()
                    finally:
                        self._feed.lock.release()
                elif snap.namespace not in self._pending:  # being read: nothing here yet
                    return False
            changed = self._apply(snap, refill=refill)
            snap.checked_at, snap.stale = now, False
            return changed
        finally:
            snap.lock.release()

    def written(self, namespaces: list[str]) -> None:
        """After a write through this process, on the writer's thread before it answers: the
        held snapshots take the write now. Readers meanwhile are served the set before it (no
        one has been told of the write yet) instead of waiting for the feed and leaving the
        event loop, as a stale snapshot makes every query do; one that could not take it is
        marked stale, and the next query catches up."""
        for ns in namespaces:
            snap = self._snapshots.get(ns)
            if snap is None:
                continue
            try:  # a feed read that starts now starts after the write committed
                self._catch_up(snap, wait=True, feed_s=0.0, refill=True)
            except SQLAlchemyError as exc:
                log.warning("applying a write to the snapshot of %s failed: %s", ns, exc)
                snap.stale = True

    def feed_age(self) -> float:
        """Seconds since the last read of the feed started (inf: never read)."""
        return time.monotonic() - self._feed.read_at

    def read_feed(self, *, older_than_s: float) -> None:
        """Read the feed unless a read started within older_than_s (one under way is waited
        for): the key ring's check for revoked keys when no query had it read."""
        with self._feed.lock:
            if time.monotonic() - self._feed.read_at >= older_than_s:
                self._read_feed()

    def _read_feed(self) -> None:
        """One read of the feed for every namespace; hand each held or loading namespace its
        changes. Hold the feed's lock."""
        with read_session(self._engine) as session:
            found = self._feed.read(session)
        if found.keys and self.on_keys is not None:
            self.on_keys()
        with self._lock:
            for ns, changes in found.changed.items():
                if ns in self._snapshots or ns in self._loading:
                    self._pending.setdefault(ns, {}).update(changes)
            held = list(self._snapshots)
        if found.pruned:  # changes may be lost: every namespace held now is read again
            with self._lock:
                self._must_reload.update(held)
            for ns in held:
                self._background.start(ns, self._reload)
        if self._feed.read_at - self._pruned_at > PRUNE_S:
            self._pruned_at = self._feed.read_at
            self._background.start("", lambda _ns: prune(self._engine))

    def _apply(self, snap: Snapshot, *, refill: bool = False) -> bool:
        """Apply the changes handed to the snapshot's namespace. Hold its lock."""
        with self._lock:
            changes = self._pending.pop(snap.namespace, None)
        if not changes:
            return False
        ids = list(changes)
        try:
            with read_session(self._engine) as session:
                rows = rows_by_id(session, snap.namespace, ids)
        except SQLAlchemyError:
            with self._lock:  # not applied: kept for the next try (newer seqs win)
                later = self._pending.get(snap.namespace, {})
                self._pending[snap.namespace] = {**changes, **later}
            raise
        dropped = snap.apply(ids, rows)
        if refill and dropped and self.on_change is not None:
            self.on_change(snap, dropped)
        self.applied += len(ids)
        snap.watermark = max(snap.watermark, *changes.values())
        return True

    def _verify(self, namespace: str) -> None:
        """Compare the served set with the database; reload when the feed missed a change.
        The fingerprint is read first, then the feed: when that read finds nothing new for
        the namespace, the snapshot is at least as new as the fingerprint, and nothing changed
        in between (a change committed meanwhile would have been found), so the two must
        agree. The snapshot's lock is held throughout: no other thread applies its changes."""
        snap = self._snapshots.get(namespace)
        if snap is None:
            return
        for _ in range(VERIFY_TRIES):
            with snap.lock:
                with read_session(self._engine) as session:
                    expected = fingerprint(session, namespace)
                with self._feed.lock:
                    self._read_feed()
                if not self._apply(snap):
                    served = snap.local_fingerprint()
                    snap.verified_at = time.monotonic()
                    break
            time.sleep(0.05)  # changes keep coming: try again between them
        else:
            snap.verified_at = time.monotonic()
            return
        if served != expected:
            log.warning("snapshot of %s differs from the database: reloading", namespace)
            self._reload(namespace)
