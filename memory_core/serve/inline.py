"""Which queries may be answered on the caller's thread (the API's event loop) instead of a
worker thread: the hop costs a GIL hand-off each way, more than a warm query at 5k cards.

The rule: a plain query (no explain, no prompt) of a namespace whose snapshot is in memory,
was read from the change feed within the refresh interval (no feed read is due) and is not
marked stale by a write, once `streak` queries of that snapshot were seen and their moving
average (weight 1/8 on the newest) is under `budget_s` of CPU (the thread's own time: waits for
the GIL under load are not the query's); and only when every row it serves is in memory (else
the caller hops after all). A namespace whose queries turn slow (a bigger snapshot, a costlier
mix) goes back to worker threads within a few queries; one outlier among quick ones does not.
Nothing here reads the database.

Layer: snapshot.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass

from memory_core.serve.snapshot import Snapshot

WEIGHT = 8  # the moving average's newest query counts 1/WEIGHT
# a query counts at most this many budgets: one outlier (a full collection, a preempted core)
# must not send a quick namespace to threads, as 50 ms at weight 1/8 would
CLAMP = 4


@dataclass(slots=True)
class _Seen:
    snapshot: weakref.ref[Snapshot]  # weak: an evicted or replaced snapshot is not kept alive
    seen: int = 0  # queries of this snapshot
    mean_s: float = 0.0  # their moving average CPU time


class InlineGate:
    """Per namespace: the snapshot last served and how long its queries take."""

    def __init__(self, *, budget_s: float, fresh_s: float, streak: int = 16) -> None:
        self.budget_s = budget_s
        self.fresh_s = fresh_s
        self.streak = streak
        self._seen: dict[str, _Seen] = {}

    def warm(self, namespace: str) -> Snapshot | None:
        """The namespace's snapshot when a plain query of it may run here and now, else None."""
        seen = self._seen.get(namespace)
        if seen is None or seen.seen < self.streak or seen.mean_s >= self.budget_s:
            return None
        snap = seen.snapshot()
        if snap is None or snap.stale or time.monotonic() - snap.checked_at >= self.fresh_s:
            return None
        return snap

    def saw(self, namespace: str, snapshot: Snapshot, took_s: float) -> None:
        """Record one plain query of the namespace and how long it took."""
        seen = self._seen.get(namespace)
        if seen is None or seen.snapshot() is not snapshot:
            seen = self._seen[namespace] = _Seen(weakref.ref(snapshot))
        took_s = min(took_s, CLAMP * self.budget_s)
        seen.mean_s = took_s if seen.seen == 0 else seen.mean_s + (took_s - seen.mean_s) / WEIGHT
        seen.seen += 1
