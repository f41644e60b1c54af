"""The served set of one namespace in memory: active cards indexed by need, compiled on use.

Loaded once per namespace, then kept current from the card change feed (migration 0013): at
most once per refresh interval, a query first applies the changes the process's one feed
reader handed its namespace (serve/feed.py), re-reading those cards alone, whatever process
changed them. A change is served
within the interval at any size, without reloading the namespace (snapshot_cache.py).

Layer: snapshot.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy.engine import Engine

from memory_core.db import read_session
from memory_core.serve.card_fetch import active_entries
from memory_core.serve.card_rows import Profile, entry_of
from memory_core.serve.changes import Fingerprint, last_seq
from memory_core.serve.entry import Entry as Entry  # the names other modules import from here
from memory_core.serve.entry import support_of as support_of
from memory_core.serve.entry import touched as touched
from memory_core.serve.entry import used as used
from memory_core.serve.index import CardIndex, Stats, build, card_needs, choose, chosen_needs

if TYPE_CHECKING:
    from memory_core.serve.atoms import Need
    from memory_core.serve.topk import Bounds


# A served card as JSON: (the other fields as a JSON object without its closing brace,
# use_count, last_used_at, decay_tier). What only a change of the card alters is encoded once;
# the use fields move with every use. A plain tuple of bytes, ints and strings, so the garbage
# collector stops tracking it: thousands of cached rows add nothing to its full passes.
ServedRow = tuple[bytes, int, str | None, int]
USE_FIELDS = frozenset({"use_count", "last_used_at", "decay_tier"})


def served_row(card_json: bytes, use_count: int, last_used_at: str | None, tier: int) -> ServedRow:
    """From a card's JSON without the use fields."""
    return (card_json.rstrip()[:-1], use_count, last_used_at, tier)


def row_json(row: ServedRow) -> bytes:
    """The card's JSON object."""
    head, use_count, last_used_at, tier = row
    last = b"null" if last_used_at is None else orjson.dumps(last_used_at)
    return b'%s,"use_count":%d,"last_used_at":%s,"decay_tier":%d}' % (head, use_count, last, tier)


@dataclass
class Snapshot:
    """Active cards of one namespace with the index over them, current up to `watermark`."""

    namespace: str
    entries: dict[uuid.UUID, Entry]
    index: CardIndex
    stats: Stats
    watermark: int  # the newest change applied (or there when the cards were read)
    loaded_at: float = field(default_factory=time.monotonic)
    checked_at: float = field(default_factory=time.monotonic)  # the last read of the feed
    verified_at: float = field(default_factory=time.monotonic)  # the last fingerprint check
    load_s: float = 0.0  # how long building it took (spaces the reloads of a big namespace)
    max_uses: int = 0
    from_file: bool = False  # read from a saved file (serve/snapshot_restore.py)
    stale: bool = False  # written through this process: read the feed before the next query
    # served cards as the API shows them, read once: a hot card is answered from memory; a
    # change of the card drops its row
    rows: dict[uuid.UUID, ServedRow] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one writer at a time
    bounds: Bounds | None = None  # the epoch of the cards' score bounds
    # index lists ordered by bound in one epoch (serve/ordered.py), and cards changed in place
    # since (uses, feedback): their places are moved in batches
    orders: dict[Any, Any] = field(default_factory=dict)
    orders_epoch: Bounds | None = None
    resorts: dict[Any, Any] = field(default_factory=dict)  # lists being ordered anew, in steps
    touched: list[Entry] = field(default_factory=list)
    order_lock: threading.Lock = field(default_factory=threading.Lock)  # orders and touched
    warming: str | None = None  # its lists ordered in the background (serve/warm.py)
    unplaced: set[Any] = field(default_factory=set)  # lists a fold found without an order
    # the tool's reminders' profiles by card (memory_core.cards.profile): what retrieval
    # demotes a reminder by when a call lacks them; few cards hold one
    profiles: dict[uuid.UUID, Profile] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for e in self.entries.values():
            e.home = self.touched

    @property
    def unindexed(self) -> list[Entry]:
        """Cards evaluated on every query (they read no variable)."""
        return self.index.unindexed

    def candidates(self, state: Mapping[str, Any]) -> list[Entry]:
        """Cards filed under a need the (normalised) state satisfies."""
        return self.index.candidates(state)

    def apply(self, changed: Iterable[uuid.UUID], rows: Sequence[Any]) -> list[uuid.UUID]:
        """Replace, add or drop the changed cards (rows: those still active); the ids whose
        served rows were dropped. Hold `lock`. The index lists they leave and join are each
        replaced once for the whole batch."""
        fresh = {r.card_id: r for r in rows}
        self.index.new_batch()
        dropped: list[uuid.UUID] = []
        gone: list[Entry] = []
        filed: list[tuple[Entry, Need | None]] = []
        for cid in dict.fromkeys(changed):
            old = self.entries.pop(cid, None)
            if old is not None:  # its equalities no longer make a need common
                self.stats.remove(card_needs(old))
                if old.indexed:
                    gone.append(old)
            if self.rows.pop(cid, None) is not None:
                dropped.append(cid)
            self.profiles.pop(cid, None)
            if (r := fresh.get(cid)) is not None:
                filed += self._enter(entry_of(r, profiles=self.profiles))
        self.index.remove_many(gone)
        self.index.add_many(filed)
        return dropped

    def _add(self, e: Entry) -> None:
        self.index.add_many(self._enter(e))

    def _enter(self, e: Entry) -> list[tuple[Entry, Need | None]]:
        """Hold the card and count its needs; what to file it under (none when broken). Each
        card chooses with the counts as the cards before it left them."""
        e.home = self.touched
        self.entries[e.card_id] = e
        options = card_needs(e)
        self.stats.add(options)
        self.max_uses = max(self.max_uses, e.use_count)
        if e.broken:
            return []
        e.indexed = True
        return [(e, choose(options, self.stats))]

    def local_fingerprint(self) -> Fingerprint:
        """The fingerprint of what is served, to compare with the database's. Hold `lock`."""
        entries = list(self.entries.values())
        newest = max((e.updated_at for e in entries if e.updated_at is not None), default=None)
        return len(entries), newest, sum(e.version for e in entries)


def load_snapshot(*, engine: Engine, namespace: str) -> Snapshot:
    """Read a namespace's active cards and build the index over them (preconditions compile
    on first use)."""
    with read_session(engine) as session:
        # the feed's position first: a change made while the cards are read is applied later
        watermark = last_seq(session)
        profiles: dict[uuid.UUID, Profile] = {}
        entries = active_entries(session=session, namespace=namespace, profiles=profiles)
    stats = Stats()
    index = build(entries.values(), stats, chosen_needs(entries.values(), stats))
    for e in entries.values():
        e.indexed = not e.broken
    return Snapshot(
        namespace,
        entries,
        index,
        stats,
        watermark,
        max_uses=max((e.use_count for e in entries.values()), default=0),
        profiles=profiles,
    )
