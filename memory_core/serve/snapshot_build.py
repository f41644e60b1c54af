"""Building a snapshot without the garbage collector in the way: full collections paused
while the rows are read, the result frozen out of later full passes, and the one cycle a
dropped snapshot holds broken.

Layer: snapshot.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Engine

from memory_core.serve.snapshot import Snapshot

_gc_lock = threading.Lock()
_gc_holds = 0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim (None elsewhere: musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim  # type: ignore[no-any-return]


_TRIM = _malloc_trim()


def trim_heap() -> bool:
    """Hand the C heap's free pages back to the system: a load frees what it read (rows,
    parsed columns, lists of a million pointers) back to malloc, which kept them (~60-80 MB
    of RSS at a million cards). False when the C library has no malloc_trim."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


@contextmanager
def no_full_collections() -> Iterator[None]:
    """Pause the cycle collector while a snapshot is built: the rows read allocate so many
    containers that full collections ran again and again, each holding the GIL (and so the
    event loop) 0.3-1.7 s at 20k cards. Nested across threads: the last one out resumes it."""
    global _gc_holds
    with _gc_lock:
        _gc_holds += 1
        gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holds -= 1
            if _gc_holds == 0:
                gc.enable()


def timed_load(loader: Callable[..., Snapshot], engine: Engine, namespace: str) -> Snapshot:
    started = time.monotonic()
    with no_full_collections():
        snap = loader(engine=engine, namespace=namespace)
        # the cards live as long as the snapshot and are freed by reference counts: out of
        # the collector's generations, a full pass no longer walks a million of them (a
        # pause of a second, every few hundred thousand allocations)
        gc.freeze()
    trim_heap()
    snap.load_s = time.monotonic() - started
    return snap


def release(snap: Snapshot) -> None:
    """Break the one cycle a dropped snapshot holds: its touched cards point at the list that
    holds them (Entry.home). Loads freeze the heap (gc.freeze), so a cycle among frozen objects
    is never collected: every eviction would leak its touched cards. A query still on the
    snapshot finishes on it; at worst its touched cards rank as they stood before their uses.
    Its lists are no longer ordered in the background (serve/warm.py)."""
    snap.warming = "dropped"
    snap.touched.clear()
