"""Redacted views of stored runs and their tainted calls, kept across batches.

A contrast needs every run of a task group, so each batch re-reads the siblings of the groups
it touches: a run of a group of n is viewed (redacted, parsed, screened for taint) up to n
times in one night. A stored run's steps are final, and its content hash names them, so the
view made once serves every later batch in this process. Bounded in runs; it keeps redacted
views only (no secret outlives the row it came from).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Collection

from memory_core.models.drafts import TrajectoryView, view_of
from memory_core.models.trajectory import Trajectory
from memory_core.screen.taint import tainted_calls

MAX_RUNS = 1024


class ViewCache:
    """Views and tainted calls by (run id, content hash), least recently used out first."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self._max = max_runs
        self._views: OrderedDict[tuple[uuid.UUID, str], TrajectoryView] = OrderedDict()
        self._tainted: dict[uuid.UUID, tuple[TrajectoryView, frozenset[int]]] = {}
        self._lock = threading.Lock()

    def view(self, row: Trajectory) -> TrajectoryView:
        """The extractor's view of a stored run (models.drafts.view_of), made once."""
        key = (row.id, row.content_hash)
        with self._lock:
            found = self._views.get(key)
            if found is not None:
                self._views.move_to_end(key)
                return found
        made = view_of(row)
        with self._lock:
            self._views[key] = made
            while len(self._views) > self._max:
                _, old = self._views.popitem(last=False)
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
