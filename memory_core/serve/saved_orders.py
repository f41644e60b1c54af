"""A snapshot's ordered index lists (serve/list_orders.py) saved with its file and installed on
a restore, so the queries right after a cold load walk ordered lists instead of sorting them
(at a million cards the background ordering takes ~12 s, and a query sorting lists ~100 ms).

Each order is saved as its cards' positions in the file and its keys, all for the epoch the
snapshot's orders were for (the keys of an older epoch that epoch loosens bound its scores
too). On a restore an order is installed only when it is exactly a permutation of the list
rebuilt under its name, its keys are finite and ascending, and the keys of a sample of its
cards bound them in that epoch; any other is dropped and a query sorts the list as before.
Cards changed in place after their key was made are saved as `touched`, and moved into
their places at the end of the load (fold_backlog).

Layer: snapshot.
"""

from __future__ import annotations

import logging
import math
import time
from array import array
from datetime import datetime
from itertools import compress, islice, repeat
from operator import is_not, le
from typing import Any

from pydantic import ValidationError

from memory_core.serve.entry import Entry, touched
from memory_core.serve.groups import named
from memory_core.serve.list_orders import fold
from memory_core.serve.snapshot import Snapshot
from memory_core.serve.snapshot_columns import Saved
from memory_core.serve.snapshot_file import Body, Rejected, Section, json_section, numbers
from memory_core.serve.topk import Bounds, base_bound, loosens, specificity, support_bound
from memory_core.serve.warm import WARM_FROM
from memory_core.settings import RankingWeights

log = logging.getLogger(__name__)
FIRST_QUERY_WAIT_S = 2.0  # a save waits this long for the load's first query to order lists
ORDERS_WAIT_S = 120.0  # and this long for the ordering to finish (~12 s at a million cards)
SAMPLE = 8  # cards per order whose keys are checked against their bound on a restore
Taken = tuple[Bounds, list[tuple[Any, list[Entry], list[float]]]]


def take(snap: Snapshot) -> Taken | None:
    """The snapshot's orders valid in its current epoch (the lists are copied on write:
    references suffice). Hold snap.lock (the cards copied with them)."""
    with snap.order_lock:
        b = snap.orders_epoch
        if b is None:
            return None
        return b, [
            (name, o[2], o[3])
            for name, o in snap.orders.items()
            if name is not None
            and (o[1] is b or loosens(o[1], b))
            and o[0] is named(snap.index, name)
        ]


def encode(snap: Snapshot, taken: Taken | None, position: dict[int, int]) -> list[Section]:
    """The orders' sections (position: each saved card's by id()). Call after the cards are
    encoded: an order a fold moved a card in since `take` is left out (the card's state as
    saved may be newer than its key there); cards changed but not yet moved are saved as
    touched."""
    if taken is None:
        return []
    b, orders = taken
    with snap.order_lock:
        now = {name: o[2] for name, o in snap.orders.items()}
        pending = list(snap.touched)
    names: list[Any] = []
    sizes: list[int] = []
    cards: list[int] = []
    keys: list[float] = []
    for name, entries, order_keys in orders:
        at = [position.get(id(e), -1) for e in entries]
        if now.get(name) is not entries or -1 in at:  # moved since, or a card not saved
            continue
        names.append(name)
        sizes.append(len(at))
        cards += at
        keys += order_keys
    epoch = {"weights": b.weights.model_dump(), "at": b.at, "max_uses": b.max_uses}
    return [
        json_section("order_epoch", epoch),
        json_section("order_names", names),
        numbers("order_sizes", "q", sizes),
        numbers("order_cards", "i", cards),
        numbers("order_keys", "d", keys),
        numbers("touched", "i", [p for e in pending if (p := position.get(id(e), -1)) >= 0]),
    ]


def wait_for_orders(snap: Snapshot) -> None:
    """A big snapshot's lists being ordered in the background (serve/warm.py): saved once
    they are, so a restore starts with them (the load's first query starts the ordering)."""
    if len(snap.entries) < WARM_FROM:
        return
    deadline = time.monotonic() + ORDERS_WAIT_S
    started = time.monotonic() + FIRST_QUERY_WAIT_S
    while time.monotonic() < deadline and (
        snap.warming == "started" or (snap.warming is None and time.monotonic() < started)
    ):
        time.sleep(0.1)


def install(snap: Snapshot, body: Body, saved: Saved, positions: dict[int, array[int]]) -> int:
    """Install the file's orders in a snapshot just rebuilt from it (before any change or
    query; positions: each list's cards', index_file.rebuild); how many. An order that cannot
    be trusted is dropped (a warning), never used."""
    if "order_epoch" not in body:
        return 0
    entries = saved.entries
    n = len(entries)
    try:
        b = _epoch(body.json("order_epoch"))
        names = body.json("order_names")
        sizes = body.numbers("order_sizes", "q", len(names) if isinstance(names, list) else -1)
        cards = body.numbers("order_cards", "i", sum(sizes))
        keys = body.numbers("order_keys", "d", len(cards))
        pending = body.numbers("touched", "i")
        if sizes and min(sizes) < 0:
            raise Rejected("a negative order size")
        for column in (cards, pending):
            if column and (min(column) < 0 or max(column) >= n):
                raise Rejected("a card position out of range")
    except (Rejected, ValidationError, ValueError, TypeError, KeyError) as exc:
        log.warning("saved orders of %r not used: %s", snap.namespace, exc)
        return 0
    for p in pending:
        touched(entries[p])  # changed after its key was made: moved by fold_backlog
    changed = {id(entries[p]) for p in pending}
    # each card's key, by position (Entry.sortkey, which _find bisects by): the lists' keys of
    # a card agree (one epoch); the orders keep theirs as arrays of doubles (list_orders.Keys)
    key_at: list[float | None] = [None] * n
    made, lo, dropped = [], 0, 0
    for raw, size in zip(names, sizes, strict=True):
        hi = lo + size
        order = _order(snap, b, raw, saved, positions, cards[lo:hi], keys[lo:hi], changed)
        lo = hi
        if order is None:
            dropped += 1
        else:
            made.append(order)
            list(map(key_at.__setitem__, order[1][2], order[1][3]))
    for name, (cards_of, _, at, keys_of, most), _ in made:
        snap.orders[name] = (cards_of, b, list(map(entries.__getitem__, at)), keys_of, most)
    has = list(map(is_not, key_at, repeat(None)))
    list(map(setattr, compress(entries, has), repeat("sortkey"), compress(key_at, has)))
    if made:
        snap.orders_epoch = b  # a query's epoch it loosens keeps them (serve/ordered.py)
    if dropped:
        log.warning("%d saved orders of %r dropped: not the lists rebuilt", dropped, snap.namespace)
    return len(made)


def fold_backlog(snap: Snapshot) -> None:
    """Cards changed since their saved keys were made (used since the file, saved as touched)
    moved to their places in the saved orders now, in the load: the first query folded them
    all at once (10k cards used since the file: 520 ms at a million cards), and every query
    checks each card still waiting."""
    b = snap.orders_epoch
    if b is None or not snap.touched:
        return
    with snap.order_lock:
        fold(snap, b, b.weights.support, specificity, len(snap.touched))


def _epoch(j: Any) -> Bounds:
    at = datetime.fromisoformat(j["at"])
    uses = j["max_uses"]
    if at.tzinfo is None or type(uses) is not int or uses < 0:
        raise Rejected("a malformed epoch")
    return Bounds(RankingWeights.model_validate(j["weights"]), at, uses)


def _name(raw: Any) -> tuple[Any, ...] | None:
    """A list's name from its JSON form (None: not a name)."""
    if not isinstance(raw, list) or not raw:
        return None
    if raw == ["un"]:
        return ("un",)
    if len(raw) != 3 or not isinstance(raw[1], str):
        return None
    kind, var, key = raw
    if kind == "eq" and isinstance(key, list) and len(key) == 2 and isinstance(key[0], str):
        return ("eq", var, (key[0], key[1]))
    if (kind == "win" and type(key) is int) or (kind == "sub" and isinstance(key, str)):
        return (kind, var, key)
    return None


def _order(
    snap: Snapshot,
    b: Bounds,
    raw: Any,
    saved: Saved,
    positions: dict[int, array[int]],
    at: Any,
    keys: array[float],
    changed: set[int],
) -> tuple[Any, tuple[Any, Any, list[int], array[float], dict[str, int]], list[int]] | None:
    """One saved order when it can be trusted: its name, (list, epoch, its cards' positions,
    keys, most support), and the positions (None: dropped)."""
    name = _name(raw)
    cards = named(snap.index, name)
    if name is None or cards is None or len(cards) != len(at) or not keys:
        return None
    # the list was rebuilt in file order: its positions are the order's, sorted
    ordered = sorted(at)
    if array("i", ordered) != positions.get(id(cards)):
        return None
    if not (math.isfinite(keys[0]) and math.isfinite(keys[-1]) and all(map(le, keys, keys[1:]))):
        return None
    sup, entries = b.weights.support, saved.entries
    step = max(len(keys) // SAMPLE, 1)
    for p, key in islice(zip(at, keys, strict=True), 0, None, step):
        e = entries[p]
        bound = base_bound(e, b, specificity) + support_bound(sup, e.trust)
        if id(e) not in changed and key > -bound:
            return None  # a key below the card's bound: not made for these cards
    # the most support of each kind, as list_orders makes it (no card of a list is broken)
    support, kinds = saved.support[b.weights.support_counts], saved.kind
    present = set(map(kinds.__getitem__, ordered))
    most: dict[str, int] = {}
    for k in present:
        of_kind = ordered if len(present) == 1 else [p for p in ordered if kinds[p] == k]
        most[saved.kinds[k]] = max(0, *map(support.__getitem__, of_kind))
    return name, (cards, b, list(at), keys, most), ordered
