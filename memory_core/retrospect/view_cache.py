"""Redacted views of stored runs and their tainted calls, kept across batches.

A contrast needs every run of a task group, so each batch re-reads the siblings of the groups
it touches: a run of a group of n is viewed (redacted, parsed, screened for taint) up to n
times in one night. A stored run's steps are final, and its content hash names them, so the
view made once serves every later batch in this process. Bounded in runs and in the text they
hold; it keeps redacted views only (no secret outlives the row it came from).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Collection

from memory_core.models.drafts import TrajectoryView, view_of
from memory_core.models.trajectory import Trajectory
from memory_core.screen.taint import tainted_calls

# a batch of 200 runs touching 35 groups of 64 runs views 2,240 siblings: at 1,024 every batch
# missed them all (a quarter of a 2,500-run night). A tau-bench run's view is ~22 KiB.
MAX_RUNS = 4096
MAX_CHARS = 64_000_000  # the text the kept views hold: runs with long outputs keep fewer
STEP_CHARS = 200  # a step's own weight beside its text (the model, its fields)


def _weight(view: TrajectoryView) -> int:
    return sum(
        STEP_CHARS + len(s.text or "") + len(s.observation or "") + len(s.error or "")
        for s in view.steps
    )


class ViewCache:
    """Views and tainted calls by (run id, content hash), least recently used out first."""

    def __init__(self, max_runs: int = MAX_RUNS, max_chars: int = MAX_CHARS) -> None:
        self._max = max_runs
        self._max_chars = max_chars
        self._chars = 0
        self._views: OrderedDict[tuple[uuid.UUID, str], tuple[TrajectoryView, int]] = OrderedDict()
        self._tainted: dict[uuid.UUID, tuple[TrajectoryView, frozenset[int]]] = {}
        self._lock = threading.Lock()

    def view(self, row: Trajectory) -> TrajectoryView:
        """The extractor's view of a stored run (models.drafts.view_of), made once."""
        key = (row.id, row.content_hash)
        with self._lock:
            found = self._views.get(key)
            if found is not None:
                self._views.move_to_end(key)
                return found[0]
        made = view_of(row)
        weight = _weight(made)
        with self._lock:
            if key in self._views:  # another thread made it meanwhile
                return self._views[key][0]
            self._views[key] = (made, weight)
            self._chars += weight
            while len(self._views) > 1 and (
                len(self._views) > self._max or self._chars > self._max_chars
            ):
                _, (old, w) = self._views.popitem(last=False)
                self._chars -= w
                if self._tainted.get(old.id, (None,))[0] is old:
                    del self._tainted[old.id]
        return made

    def tainted(self, view: TrajectoryView) -> Collection[int]:
        """The run's calls made on an instruction from untrusted text (screen.taint)."""
        with self._lock:
            hit = self._tainted.get(view.id)
        if hit is not None and hit[0] is view:  # the same view object: the same steps
            return hit[1]
        found = frozenset(tainted_calls(view.steps))
        with self._lock:
            self._tainted[view.id] = (view, found)
            while len(self._tainted) > self._max:  # views made elsewhere: bounded all the same
                del self._tainted[next(iter(self._tainted))]
        return found


VIEWS = ViewCache()
