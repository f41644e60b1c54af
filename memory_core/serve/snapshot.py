"""The served set of one namespace in memory: active cards, compiled once, indexed by atoms.

Reads never touch the database: a snapshot is swapped in whole when it is older than the
refresh interval and the namespace's fingerprint (count, newest update, version sum of its
active cards) changed. The reload runs in a background thread while readers keep the old
snapshot, so a nightly run in another process shows up within seconds without a slow query.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.errors import InvalidPrecondition
from memory_core.models.card import Card, CardStatus
from memory_core.preconditions import CompiledPrecondition, compile_stored
from memory_core.screen.provenance import trust
from memory_core.serve.atoms import Atom, AtomKey, equality_atoms

Fingerprint = tuple[int, Any, int]


@dataclass(slots=True)
class Entry:
    """One active card as retrieval needs it; the full row is read only for the top k."""

    card_id: uuid.UUID
    kind: str
    confidence: float
    seen_at: datetime  # last use, else last update: what recency decays from
    use_count: int
    evidence_count: int
    compiled: tuple[CompiledPrecondition, ...]
    scenario: str
    text: str  # scenario, steps and failure modes: what a free-text query is compared with
    broken: bool = False  # a stored precondition no longer compiles: never served
    trust: float = 1.0  # the weight of the card's origin (memory_core.screen.provenance)
    pinned: bool = False  # never withheld by the holdout


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
    """Active cards of one namespace with the atom index over them."""

    namespace: str
    entries: dict[uuid.UUID, Entry]
    index: dict[str, dict[AtomKey, list[Entry]]]  # variable -> literal -> cards keyed on it
    unindexed: list[Entry]  # cards without an equality atom: evaluated on every query
    fingerprint: Fingerprint
    loaded_at: float = field(default_factory=time.monotonic)
    load_s: float = 0.0  # how long building it took (spaces the rebuilds of a big namespace)
    max_uses: int = 0
    # served cards as the API shows them, read once per snapshot: a hot card is answered from
    # memory; the snapshot's replacement (any change to the namespace's cards) drops them
    rows: dict[uuid.UUID, ServedRow] = field(default_factory=dict)

    def candidates(self, state_keys: dict[str, AtomKey | None]) -> list[Entry]:
        """Cards one of whose key atoms the state satisfies, plus the unindexed ones."""
        out = list(self.unindexed)
        for var, key in state_keys.items():
            if key is None:
                continue
            by_value = self.index.get(var)
            if by_value:
                out.extend(by_value.get(key, ()))
        return out


def _entry_text(row: Any) -> str:
    steps = " ".join(f"{a.get('tool', '')} {a.get('note', '')}" for a in row.action_sequence)
    modes = " ".join(f"{m.get('mode', '')} {m.get('handling', '')}" for m in row.failure_modes)
    return f"{row.scenario} {steps} {modes} {row.value or ''}"


def fingerprint(session: Session, namespace: str) -> Fingerprint:
    """What changes whenever the served set of a namespace changes."""
    row = session.execute(
        select(func.count(), func.max(col(Card.updated_at)), func.sum(col(Card.version))).where(
            col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value
        )
    ).one()
    return int(row[0]), row[1], int(row[2] or 0)


def load_snapshot(*, engine: Engine, namespace: str) -> Snapshot:
    """Read and compile a namespace's active cards and build its atom index."""
    cols: tuple[Any, ...] = (
        Card.card_id,
        Card.kind,
        Card.confidence,
        Card.last_used_at,
        Card.updated_at,
        Card.use_count,
        Card.evidence_count,
        Card.preconditions,
        Card.scenario,
        Card.action_sequence,
        Card.failure_modes,
        Card.value,
        Card.provenance,
        Card.pinned,
    )
    with Session(engine) as session:
        fp = fingerprint(session, namespace)
        rows = session.execute(
            select(*cols).where(
                col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value
            )
        ).all()
    entries: dict[uuid.UUID, Entry] = {}
    atoms_of: dict[uuid.UUID, list[Atom]] = {}
    counts: Counter[Atom] = Counter()
    for r in rows:
        try:
            compiled = tuple(compile_stored(p) for p in r.preconditions)
            broken = False
        except InvalidPrecondition:
            compiled, broken = (), True
        e = Entry(
            r.card_id,
            r.kind,
            r.confidence,
            r.last_used_at or r.updated_at,
            r.use_count,
            r.evidence_count,
            compiled,
            r.scenario,
            _entry_text(r),
            broken,
            trust(r.provenance or {}),
            bool(r.pinned),
        )
        entries[e.card_id] = e
        atoms = list(dict.fromkeys(a for c in compiled for a in equality_atoms(c.source)))
        atoms_of[e.card_id] = atoms
        counts.update(atoms)
    index: dict[str, dict[AtomKey, list[Entry]]] = defaultdict(dict)
    unindexed: list[Entry] = []
    for cid, e in entries.items():
        if e.broken:
            continue
        atoms = atoms_of[cid]
        if not atoms:
            unindexed.append(e)
            continue
        # one atom per card suffices (all must hold); the rarest keeps candidate lists short
        var, key = min(atoms, key=lambda a: counts[a])
        index[var].setdefault(key, []).append(e)
    return Snapshot(
        namespace,
        entries,
        dict(index),
        unindexed,
        fp,
        max_uses=max((e.use_count for e in entries.values()), default=0),
    )


LOAD_SHARE = 0.2  # the most of one core snapshot rebuilds may take over time


def _timed_load(loader: Callable[..., Snapshot], engine: Engine, namespace: str) -> Snapshot:
    started = time.monotonic()
    snap = loader(engine=engine, namespace=namespace)
    snap.load_s = time.monotonic() - started
    return snap


class SnapshotCache:
    """Snapshots per namespace, refreshed in the background when the database changed."""

    def __init__(
        self,
        *,
        engine: Engine,
        refresh_s: float = 2.0,
        loader: Callable[..., Snapshot] = load_snapshot,
    ) -> None:
        self._engine = engine
        self._refresh_s = refresh_s
        self._loader = loader
        self._snapshots: dict[str, Snapshot] = {}
        self._lock = threading.Lock()
        self._refreshing: set[str] = set()
        self.on_load: Callable[[], None] | None = None  # after a snapshot was loaded

    def get(self, namespace: str) -> Snapshot:
        """The namespace's snapshot (loaded now the first time, refreshed in the background)."""
        snap = self._snapshots.get(namespace)
        if snap is None:
            with self._lock:
                snap = self._snapshots.get(namespace)
                if snap is None:
                    snap = _timed_load(self._loader, self._engine, namespace)
                    self._snapshots[namespace] = snap
                    self._loaded()
            return snap
        # a rebuild costs a core for load_s: at most one in LOAD_SHARE of the time goes to it,
        # so a big namespace that changes all night (decay, consolidation) still gets served
        if time.monotonic() - snap.loaded_at > max(self._refresh_s, snap.load_s / LOAD_SHARE):
            self._refresh_later(namespace)
        return snap

    def ready(self, namespace: str) -> bool:
        """True when a query of this namespace is answered from memory (no load first)."""
        return namespace in self._snapshots

    def _loaded(self) -> None:
        if self.on_load is not None:
            self.on_load()

    def invalidate(self, namespaces: Sequence[str] | None = None) -> None:
        """Drop snapshots (after a write through this process): the next read reloads."""
        with self._lock:
            for ns in list(self._snapshots) if namespaces is None else namespaces:
                self._snapshots.pop(ns, None)

    def _refresh_later(self, namespace: str) -> None:
        with self._lock:
            if namespace in self._refreshing:
                return
            self._refreshing.add(namespace)
        threading.Thread(target=self._refresh, args=(namespace,), daemon=True).start()

    def _refresh(self, namespace: str) -> None:
        try:
            old = self._snapshots.get(namespace)
            with Session(self._engine) as session:
                fp = fingerprint(session, namespace)
            if old is not None and fp == old.fingerprint:
                old.loaded_at = time.monotonic()  # unchanged: keep it, check again later
                return
            snap = _timed_load(self._loader, self._engine, namespace)
            with self._lock:
                self._snapshots[namespace] = snap
            self._loaded()
        finally:
            with self._lock:
                self._refreshing.discard(namespace)
