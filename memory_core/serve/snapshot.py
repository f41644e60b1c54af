"""The served set of one namespace in memory: active cards, compiled once, indexed by need.

Loaded once per namespace, then kept current from the card change feed (migration 0013): at
most once per refresh interval, a query first reads the changes numbered above the snapshot's
watermark and re-reads those cards alone, whatever process changed them. A change is served
within the interval at any size, without reloading the namespace (snapshot_cache.py).
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import TYPE_CHECKING, Any
from weakref import WeakValueDictionary

import orjson
from sqlalchemy import JSON, Text, select, type_coerce
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.models.card import Card, CardStatus
from memory_core.preconditions import CompiledPrecondition, compile_stored
from memory_core.screen.provenance import trust
from memory_core.serve.atoms import Need
from memory_core.serve.changes import COLUMNS, Fingerprint, last_seq
from memory_core.serve.index import CardIndex, NeedsMemo, Stats, build, card_needs, choose

if TYPE_CHECKING:
    from memory_core.serve.topk import Bounds

LOOKBACK_S = 60.0  # a change committed this long after a later-numbered one is still applied


@dataclass(slots=True)
class Entry:
    """One active card as retrieval needs it; the full row is read only for the top k."""

    card_id: uuid.UUID
    kind: str
    confidence: float
    seen_at: datetime  # last use, else last update: what recency decays from
    use_count: int
    evidence_count: int
    compiled: tuple[CompiledPrecondition, ...]  # shared by every card of the same text
    scenario: str
    rest: str  # steps, failure modes and value: `text` without the scenario (held once)
    broken: bool = False  # a stored precondition no longer compiles: never served
    trust: float = 1.0  # the weight of the card's origin (memory_core.screen.provenance)
    pinned: bool = False  # never withheld by the holdout
    version: int = 1
    updated_at: datetime | None = None
    filed: Need | None = None  # where the index holds it (memory_core.serve.index)
    indexed: bool = False
    words: frozenset[str] | None = None  # the content words of text, for free-text queries
    run_count: int = 0  # distinct runs supporting the lesson (see support_of)
    # (epoch, the highest standing the card can have in it, the most support can add): one
    # attribute so that threads computing it for different epochs never mix (serve/topk.py)
    bound: tuple[object, float, float] = (None, 0.0, 0.0)
    sortkey: float = 0.0  # the bound its lists were ordered by (serve/ordered.py)
    # its snapshot's `touched` list, where a change in place is reported (a list, not the
    # snapshot: no reference cycle, a dropped snapshot is freed by reference counts)
    home: list[Entry] | None = None

    @property
    def text(self) -> str:
        """Scenario, steps and failure modes: what a free-text query is compared with."""
        return f"{self.scenario} {self.rest}"


def support_of(e: Entry, counts: str) -> int:
    """What the support term and ties count (RankingWeights.support_counts): the card's
    evidence rows, or the distinct runs behind it."""
    return e.run_count if counts == "runs" else e.evidence_count


def touched(e: Entry) -> None:
    """After a change of the card's score parts in place: its score bound is computed again."""
    e.bound = (None, 0.0, 0.0)
    if e.home is not None:  # its place in the ordered lists may now be too low
        e.home.append(e)


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
    stale: bool = False  # written through this process: read the feed before the next query
    # served cards as the API shows them, read once: a hot card is answered from memory; a
    # change of the card drops its row
    rows: dict[uuid.UUID, ServedRow] = field(default_factory=dict)
    # changes applied lately and the watermark per feed read: a transaction that commits after
    # a later-numbered one is still found within LOOKBACK_S
    seen: set[int] = field(default_factory=set)
    marks: list[tuple[float, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one writer at a time
    bounds: Bounds | None = None  # the epoch of the cards' score bounds
    # index lists ordered by bound in one epoch (serve/ordered.py), and cards changed in place
    # since (uses, feedback): their places are moved in batches
    orders: dict[Any, Any] = field(default_factory=dict)
    orders_epoch: Bounds | None = None
    touched: list[Entry] = field(default_factory=list)
    order_lock: threading.Lock = field(default_factory=threading.Lock)  # orders and touched

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

    def low(self, now: float) -> int:
        """Where the next feed read starts: the watermark as of LOOKBACK_S ago."""
        while len(self.marks) > 1 and self.marks[1][0] <= now - LOOKBACK_S:
            self.marks.pop(0)
        return self.marks[0][1] if self.marks else self.watermark

    def apply(self, changed: Iterable[uuid.UUID], rows: Sequence[Any]) -> None:
        """Replace, add or drop the changed cards (rows: those still active). Hold `lock`."""
        fresh = {r.card_id: r for r in rows}
        for cid in dict.fromkeys(changed):
            old = self.entries.pop(cid, None)
            if old is not None and old.indexed:
                self.index.remove(old)
            self.rows.pop(cid, None)
            if (r := fresh.get(cid)) is not None:
                self._add(entry_of(r))

    def _add(self, e: Entry) -> None:
        e.home = self.touched
        self.entries[e.card_id] = e
        options = card_needs(e)
        self.stats.add(options)
        if not e.broken:
            self.index.add(e, choose(options, self.stats))
            e.indexed = True
        self.max_uses = max(self.max_uses, e.use_count)

    def local_fingerprint(self) -> Fingerprint:
        """The fingerprint of what is served, to compare with the database's. Hold `lock`."""
        entries = list(self.entries.values())
        newest = max((e.updated_at for e in entries if e.updated_at is not None), default=None)
        return len(entries), newest, sum(e.version for e in entries)


def _rest(action_sequence: Any, failure_modes: Any, value: Any) -> str:
    steps = " ".join(f"{a.get('tool', '')} {a.get('note', '')}" for a in action_sequence)
    modes = " ".join(f"{m.get('mode', '')} {m.get('handling', '')}" for m in failure_modes)
    return f"{steps} {modes} {value or ''}"


# compiled preconditions by normalised text, shared by every card (and snapshot) holding the
# text while one does: a compiled program costs about 900 bytes, and a million cards hold a
# few hundred thousand distinct texts (an lru cache of 65k recompiled the rest per card)
_SHARED: WeakValueDictionary[str, CompiledPrecondition] = WeakValueDictionary()


def shared_compiled(source: str) -> CompiledPrecondition:
    """The compiled precondition of a stored text, one object per text (never mutated)."""
    c = _SHARED.get(source)
    if c is None:
        c = _SHARED.setdefault(source, compile_stored(source, on_use=True))
    return c


class LoadMemo:
    """What the cards of one load share: precondition tuples by stored list, origins' weights
    by stored provenance."""

    def __init__(self) -> None:
        self.lists: dict[Any, tuple[CompiledPrecondition, ...]] = {}
        self.trusts: dict[Any, float] = {}
        self.texts: dict[str, str] = {}  # steps and failure modes, often repeated
        self.compiled: dict[str, CompiledPrecondition] = {}

    def text(self, value: str) -> str:
        """The load's one string equal to value."""
        return self.texts.setdefault(value, value)


def _compiled(stored: Any, memo: LoadMemo | None) -> tuple[CompiledPrecondition, ...]:
    """A card's precondition list (as stored: JSON text or parsed), one tuple per distinct
    list within a load; the texts compile on first use (an uncompilable one never holds)."""
    key = stored if isinstance(stored, (str, bytes)) else tuple(stored)
    if memo is not None and (found := memo.lists.get(key)) is not None:
        return found
    if memo is None:
        out = tuple(shared_compiled(p) for p in _json(stored))
    else:  # a plain dict first: the shared one's lookups cost ~1.5 us each
        out = tuple(
            memo.compiled.get(p) or memo.compiled.setdefault(p, shared_compiled(p))
            for p in _json(stored)
        )
    if memo is not None:
        memo.lists[key] = out
    return out


def _trust(stored: Any, memo: LoadMemo | None) -> float:
    if memo is None or not isinstance(stored, (str, bytes)):
        return trust(_json(stored) or {})
    if (found := memo.trusts.get(stored)) is None:
        found = memo.trusts[stored] = trust(_json(stored) or {})
    return found


def _json(value: Any) -> Any:
    """A JSON column read as text (SQLite) or already parsed (the PostgreSQL driver)."""
    return orjson.loads(value) if isinstance(value, (str, bytes)) else value


# a row's values by position: a Row's attribute access by name costs ~0.6 us, 16 of them
# per card were a fifth of a load; unpacking it is one C call
_FIELDS = itemgetter(
    *(
        [c.key for c in COLUMNS].index(name)
        for name in (
            "card_id",
            "kind",
            "confidence",
            "last_used_at",
            "updated_at",
            "use_count",
            "evidence_count",
            "run_count",
            "preconditions",
            "scenario",
            "action_sequence",
            "failure_modes",
            "value",
            "provenance",
            "pinned",
            "version",
        )
    )
)


def entry_of(r: Any, memo: LoadMemo | None = None) -> Entry:
    """A card row as retrieval needs it (changes.COLUMNS; JSON columns parsed or as text);
    memo shares precondition lists and origins between the cards of one load."""
    (card_id, kind, confidence, last_used, updated, uses, evidence, runs, pre, scenario, steps,
     modes, value, provenance, pinned, version) = _FIELDS(tuple(r))  # fmt: skip
    rest = _rest(_json(steps), _json(modes), value)
    return Entry(
        card_id,
        sys.intern(kind),
        confidence,
        last_used or updated,
        uses,
        evidence,
        _compiled(pre, memo),
        scenario,
        rest if memo is None else memo.text(rest),
        False,
        _trust(provenance, memo),
        bool(pinned),
        version,
        updated,
        run_count=runs,
    )


def _raw_columns() -> tuple[Any, ...]:
    """changes.COLUMNS with the JSON columns as their stored text: parsed by orjson, faster
    than the driver's json module at a million rows."""
    return tuple(
        type_coerce(c, Text).label(c.key) if isinstance(c.type, JSON) else c for c in COLUMNS
    )


def load_snapshot(*, engine: Engine, namespace: str) -> Snapshot:
    """Read and compile a namespace's active cards and build the index over them."""
    with Session(engine) as session:
        # the feed's position first: a change made while the cards are read is applied later
        watermark = last_seq(session)
        result = session.execute(
            select(*_raw_columns()).where(
                col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value
            ),
            # fetched in batches (a server-side cursor on PostgreSQL): all rows at once were
            # the load's peak of memory, which the allocator keeps as the process's size
            execution_options={"yield_per": 10_000},
        )
        memo = LoadMemo()
        entries: dict[uuid.UUID, Entry] = {}
        for rows in result.partitions(10_000):  # the rows of one batch at a time in memory
            for r in rows:
                entries[r.card_id] = entry_of(r, memo)
    del memo
    stats = Stats()
    needs_memo = NeedsMemo()  # while every card's precondition tuple is alive
    options = [card_needs(e, needs_memo) for e in entries.values()]
    for o in options:
        stats.add(o)
    index = build(entries.values(), stats, options)
    for e in entries.values():
        e.indexed = not e.broken
    return Snapshot(
        namespace,
        entries,
        index,
        stats,
        watermark,
        marks=[(time.monotonic(), watermark)],
        max_uses=max((e.use_count for e in entries.values()), default=0),
    )
