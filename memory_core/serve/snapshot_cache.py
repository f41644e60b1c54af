"""Snapshots per namespace, kept current from the change feed instead of being reloaded.

A query applies its namespace's changes first when its snapshot was last checked more than the
refresh interval ago (or this process wrote to the namespace since); a server's cache does
that in a thread every half interval while queries come (serve/feed_poller.py). One reader
reads the feed for every namespace at most once per interval (serve/feed.py) and hands each
its changes; a namespace with changes then reads its changed cards alone. A reload of the
whole namespace happens only when the feed cannot be trusted: it was pruned past the reader's
position, or the periodic fingerprint check (count, newest update, version sum) disagrees with
what is served. Reloads run in a background thread. The feed's side lives in
serve/snapshot_catchup.py; loading, eviction, reloads and saves here.

Memory is bounded in cards: past `max_cards`, the least recently queried namespaces leave the
cache (a query still holding one finishes on it; nothing refreshes or verifies it any more) and
are loaded again on their next query. The namespace just loaded always stays, however big.

Layer: cache.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from memory_core.db import read_session
from memory_core.serve.feed import FeedReader
from memory_core.serve.feed_poller import FeedPoller
from memory_core.serve.snapshot import Snapshot, load_snapshot
from memory_core.serve.snapshot_build import release, timed_load
from memory_core.serve.snapshot_catchup import FeedCatchUp
from memory_core.serve.snapshot_restore import SnapshotFiles, cold_load, save
from memory_core.serve.upkeep_threads import UpkeepThreads

log = logging.getLogger(__name__)
LOAD_SHARE = 0.2  # the most of one core whole reloads may take over time
VERIFY_S = 60.0  # how often the served set is compared with the database's fingerprint
# ~650 MB RSS: 2-2.7 KB a card held (bench/scale_namespaces.py: 657 MB at 255k cards)
MAX_CARDS = 250_000


class SnapshotCache(FeedCatchUp):
    """Snapshots per namespace: loaded on first use, then changed card by card."""

    def __init__(
        self,
        *,
        engine: Engine,
        refresh_s: float = 1.0,
        loader: Callable[..., Snapshot] = load_snapshot,
        verify_s: float = VERIFY_S,
        max_cards: int = MAX_CARDS,
        files: SnapshotFiles | None = None,
        poll: bool = False,
    ) -> None:
        self._engine = engine
        self._refresh_s = refresh_s
        self._verify_s = verify_s
        self._loader = loader
        self._max_cards = max_cards
        self.files = files  # saved snapshots: cold loads read them, full loads write them
        # least recently queried first; changed only under _lock
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        # one load per namespace at a time, and loads of different namespaces side by side
        self._loading: dict[str, threading.Lock] = {}
        self._background = UpkeepThreads()  # reloads, checks, saves, pruning
        self._pruned_at = time.monotonic()
        self._feed = FeedReader()  # one read of the change feed for every namespace
        self._pending: dict[str, dict[uuid.UUID, int]] = {}  # changes handed out, not applied
        self._must_reload: set[str] = set()  # held when the feed was pruned past the reader
        self.on_load: Callable[[], None] | None = None  # after a snapshot was loaded
        # the poller's catch-ups: given the cards whose served rows they dropped
        self.on_change: Callable[[Snapshot, list[uuid.UUID]], None] | None = None
        self.on_keys: Callable[[], None] | None = None  # keys revoked or deleted, read in the feed
        self.applied = 0  # changed cards applied (for tests and /metrics)
        self.reloads = 0  # whole reloads after the first load
        self.loads = 0  # first loads, and loads again after an eviction
        self.evictions = 0  # namespaces dropped to stay within max_cards
        # the feed read in a thread while queries come, not by them (serve/feed_poller.py)
        self.poller = FeedPoller(self, refresh_s) if poll else None

    def get(self, namespace: str) -> Snapshot:
        """The namespace's snapshot: loaded now the first time, brought up to date from the
        feed when it was last checked more than the refresh interval ago."""
        if self.poller is not None:
            self.poller.queried()
        snap = self._snapshots.get(namespace)
        if snap is None:
            return self._load(namespace)
        with self._lock:  # most recently used last
            if namespace in self._snapshots:
                self._snapshots.move_to_end(namespace)
        now = time.monotonic()
        due = snap.stale or now - snap.checked_at >= self._refresh_s
        # one caller reads the feed, the others serve what is there meanwhile; after a write
        # through this process every caller waits for it (read your writes)
        if due:
            try:
                self._catch_up(snap, wait=snap.stale)
            except SQLAlchemyError as exc:  # the database is down: serve what we have
                log.warning("reading the card change feed failed: %s", exc)
        if namespace in self._must_reload:  # tried again until a reload replaced it
            self._background.start(namespace, self._reload)
        if now - snap.verified_at >= self._verify_s:
            self._background.start(namespace, self._verify)
        return snap

    def preload(self, namespaces: Sequence[str]) -> int:
        """Load these namespaces now, in order, while the budget has room, and wait for their
        saves: a server does it before forking its workers, which then share the pages (no
        thread may run across a fork). How many cards are held."""
        for ns in namespaces:
            if self.cached()[1] >= self._max_cards:
                break
            self._load(ns)
        self._background.wait()
        return self.cached()[1]

    def catch_up_all(self, *, older_than_s: float) -> int:
        """Bring every held snapshot last checked this long ago current (the poller's round;
        a snapshot or feed another thread holds is left to it); how many were."""
        done = 0
        for snap in list(self._snapshots.values()):
            checked = snap.checked_at
            if time.monotonic() - checked >= older_than_s:
                self._catch_up(snap, wait=False, feed_s=older_than_s, refill=True)
                done += snap.checked_at != checked
        return done

    def close(self) -> None:
        """Stop the feed's thread (queries then read the feed themselves when it is due)."""
        if self.poller is not None:
            self.poller.close()

    def touch(self, namespace: str) -> None:
        """A query answered without `get` (inline): the namespace is the most recently used."""
        if self.poller is not None:
            self.poller.queried()
        with self._lock:
            if namespace in self._snapshots:
                self._snapshots.move_to_end(namespace)

    def _load(self, namespace: str) -> Snapshot:
        """Load a namespace not in the cache (once, however many callers ask at once), then
        evict the least recently used ones past the budget."""
        with self._lock:
            gate = self._loading.setdefault(namespace, threading.Lock())
        with gate:
            snap = self._snapshots.get(namespace)
            if snap is not None:  # another caller loaded it meanwhile
                with self._lock:
                    if self._loading.get(namespace) is gate:
                        del self._loading[namespace]
                return snap
            if self._feed.watermark is None:  # changes from here on are handed to it
                with self._feed.lock, read_session(self._engine) as session:
                    self._feed.place(session)
            try:
                load = partial(cold_load, self._loader, self.files)  # from its file if any
                snap = timed_load(load, self._engine, namespace)
            except BaseException:  # the next query loads it afresh: what was handed out is moot
                with self._lock:
                    self._pending.pop(namespace, None)
                raise
            with self._lock:
                self._snapshots[namespace] = snap
                self._loading.pop(namespace, None)
                self.loads += 1
                self._evict(keep=namespace)
        self._loaded()
        self._save_later(snap)
        return snap

    def _evict(self, *, keep: str) -> None:
        """Drop the least recently used namespaces past max_cards. Hold _lock."""
        total = sum(len(s.entries) for s in self._snapshots.values())
        for ns in list(self._snapshots):
            if total <= self._max_cards:
                break
            if ns != keep:
                gone = self._snapshots.pop(ns)
                self._pending.pop(ns, None)
                self._must_reload.discard(ns)
                total -= len(gone.entries)
                release(gone)
                self.evictions += 1

    def drop(self, namespace: str) -> None:
        """Forget a deleted namespace's snapshot: its feed went with it, so none catches up."""
        with self._lock:
            gone = self._snapshots.pop(namespace, None)
            self._pending.pop(namespace, None)
            self._must_reload.discard(namespace)
        if gone is not None:
            release(gone)

    def cached(self) -> tuple[int, int]:
        """Namespaces and cards held now."""
        with self._lock:
            return len(self._snapshots), sum(len(s.entries) for s in self._snapshots.values())

    def ready(self, namespace: str) -> bool:
        """True when a query of this namespace is answered from memory (no load first)."""
        return namespace in self._snapshots

    def invalidate(self, namespaces: Sequence[str] | None = None) -> None:
        """After a write through this process: the next read applies the feed first."""
        for ns in list(self._snapshots) if namespaces is None else namespaces:
            snap = self._snapshots.get(ns)
            if snap is not None:
                snap.stale = True

    def _loaded(self) -> None:
        if self.on_load is not None:
            self.on_load()

    def _reload(self, namespace: str) -> None:
        old = self._snapshots.get(namespace)
        if old is None:  # evicted meanwhile: its next query loads it afresh
            return
        # a reload costs a core for load_s: at most one in LOAD_SHARE of the time goes to it
        if time.monotonic() - old.loaded_at < old.load_s / LOAD_SHARE:
            return
        snap = timed_load(self._loader, self._engine, namespace)
        with self._lock:
            if self._snapshots.get(namespace) is not old:  # evicted (or replaced) meanwhile
                return
            self._snapshots[namespace] = snap
            self._must_reload.discard(namespace)
            self._evict(keep=namespace)
        release(old)
        self.reloads += 1
        self._loaded()
        self._save_later(snap)

    def _save_later(self, snap: Snapshot) -> None:
        """After a full load of a big namespace: its file, written off the query path."""
        engine = self._engine
        if (files := self.files) is not None and files.wanted(snap):
            self._background.start(f"save {snap.namespace}", lambda _: save(engine, files, snap))
