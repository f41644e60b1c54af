"""A new snapshot's lists put in order in the background, so that the first queries to reach
a list do not sort it: at a million cards a list holds tens of thousands of cards, and a
query reaching a few unsorted ones took hundreds of milliseconds.

A thread started by the first walk of a big snapshot orders every named list of the index
for that walk's epoch, biggest first, each outside the lock (bounding a list is what any
query does) and installed under it only when the list, the epoch and the absence of an order
are still as they were, and no card of it was changed and folded meanwhile (the fold could not
move it in an order not yet there); otherwise the work is dropped and a query orders the list
as before.
After every few milliseconds of work it sleeps as long, so queries get the interpreter at
least half the time. When an epoch is renewed only to tighten the bounds and its orders are
no longer close enough (list_orders.close_enough), the lists are ordered for it here again,
while the queries walk the old orders: resorting them in the queries' steps put 1-10 ms of
CPU into a query now and then at 100k cards, a good part of the p99.

Layer: walk.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable

from memory_core.serve.groups import named, named_lists
from memory_core.serve.list_orders import sorted_order
from memory_core.serve.topk import Bounds, Walked, close_enough

log = logging.getLogger(__name__)

WARM_FROM = 5_000  # cards: a smaller snapshot's lists sort in well under a millisecond
SMALL = 64  # lists this short are left to the queries (sorted in microseconds)
SLICE_S = 0.004  # work between pauses (CPU seconds of this thread)
PAUSE_S = 0.004  # the query threads' turn


def start_warming(snap: Walked, b: Bounds, spec: Callable[[int], float]) -> None:
    """Order the snapshot's lists in a daemon thread (big ones only): after its first walk,
    and again for an epoch renewed since (warming "renewed")."""
    with snap.order_lock:
        if snap.warming not in (None, "renewed"):
            return
        first = snap.warming is None
        snap.warming = "started"
    if len(snap.entries) < WARM_FROM:
        snap.warming = "small"
        return
    thread = threading.Thread(
        target=_run, args=(snap, b, spec, first), name=f"warm-{snap.namespace}", daemon=True
    )
    thread.start()


_ONE_AT_A_TIME = threading.Lock()  # many big namespaces loaded at once: ordered in turn


def _run(snap: Walked, b: Bounds, spec: Callable[[int], float], first: bool) -> None:
    with _ONE_AT_A_TIME:
        started = time.monotonic()
        made = 0
        while True:  # an error ends the thread with its traceback; queries order
            made += warm(snap, b, spec)
            if first:
                # out of the collector's generations, as a load's cards are (serve/
                # snapshot_build.py): a full collection read the header of every card these
                # lists hold, 27 ms at 100k. Once: a renewal's lists are out of its sight
                # already (entry.untracked), and each freeze would keep the garbage of the
                # time for good
                gc.freeze()
                first = False
            with snap.order_lock:  # an epoch renewed meanwhile is ordered too
                if snap.orders_epoch in (b, None) or snap.warming == "dropped":
                    if snap.warming != "dropped":
                        snap.warming = "done"
                    break
                b = snap.orders_epoch
    log.info(
        "namespace %r: %d lists ordered in the background in %.1f s",
        snap.namespace,
        made,
        time.monotonic() - started,
    )


def warm(snap: Walked, b: Bounds, spec: Callable[[int], float], pause_s: float = PAUSE_S) -> int:
    """Order every named list of at least SMALL cards not ordered for epoch b yet (none, or
    a saved one too old to stand for it: list_orders.close_enough), for epoch b; how many
    orders were installed. Stops when the snapshot's epoch moves on or it is dropped."""
    made = 0
    lists = sorted(named_lists(snap.index), key=lambda g: -len(g[1]))
    worked = time.thread_time()
    for name, cards in lists:
        if len(cards) < SMALL or snap.orders_epoch is not b or snap.warming == "dropped":
            break  # the rest are small, a newer epoch orders anew, or the snapshot is gone
        held = snap.orders.get(name)
        if held is not None and (held[1] is b or close_enough(held[1], b)):
            continue
        if held is None:
            snap.unplaced.discard(name)
        order = sorted_order(cards, b, spec)
        with snap.order_lock:
            if (
                snap.orders_epoch is b
                # none made, or the old one (a file's) neither patched nor folded meanwhile
                and snap.orders.get(name) is held
                and named(snap.index, name) is cards
                # a card of it changed and was folded meanwhile: its key here is stale
                and name not in snap.unplaced
            ):
                snap.orders[name] = (cards, b, *order)
                snap.resorts.pop(name, None)  # the queries' steps towards it, not needed
                made += 1
        if time.thread_time() - worked >= SLICE_S:
            time.sleep(pause_s)
            worked = time.thread_time()
    return made
