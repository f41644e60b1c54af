"""One active card as retrieval holds it in a snapshot (memory_core.serve.snapshot).

Layer: cards.
"""

from __future__ import annotations

import ctypes
import gc
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from memory_core.preconditions import CompiledPrecondition
from memory_core.serve.atoms import Need

_PINNED, _INDEXED = 1, 2  # Entry._marks: these two flags, then the version (<< 2)


@dataclass(slots=True, init=False)
class Entry:
    """One active card as retrieval needs it; the full row is read only for the top k.

    pinned, indexed and version, read off the query path, share one slot (`_marks`): two
    pointers fewer make an Entry 192 bytes, not 208 (16 MB at a million cards)."""

    card_id: uuid.UUID
    kind: str
    confidence: float
    seen_at: datetime  # last use, else last update: what recency decays from
    use_count: int
    evidence_count: int
    compiled: tuple[CompiledPrecondition, ...]  # shared by every card of the same text
    scenario: str
    rest: str  # steps, failure modes and value: `text` without the scenario (held once)
    broken: bool  # a stored precondition no longer compiles: never served
    trust: float  # the weight of the card's origin (memory_core.screen.provenance)
    updated_at: datetime | None
    filed: Need | None  # where the index holds it (memory_core.serve.index)
    words: tuple[str, ...] | None  # the content words of text (keywords.term_tuple)
    run_count: int  # distinct runs supporting the lesson (see support_of)
    # (its epoch's serial, the highest standing the card can have in it, the most support can
    # add): one attribute so that threads computing it for different epochs never mix
    # (serve/topk.py); atoms only, so the collector does not track it
    bound: tuple[int | None, float, float]
    # minus the bound its lists hold it at (serve/list_orders.py): the lists' own key object
    sortkey: float
    # its snapshot's `touched` list, where a change in place is reported (a list, not the
    # snapshot: no reference cycle, a dropped snapshot is freed by reference counts)
    home: list[Entry] | None
    # the most uses every key and bound the card is held at assumes (-1: none; a use past it
    # moves the card, serve/topk.py's assumed_uses): a use within it moves nothing
    key_uses: int = field(init=False, compare=False, repr=False)
    _marks: int  # pinned (never withheld by the holdout), indexed, version << 2

    def __init__(
        self,
        card_id: uuid.UUID,
        kind: str,
        confidence: float,
        seen_at: datetime,
        use_count: int,
        evidence_count: int,
        compiled: tuple[CompiledPrecondition, ...],
        scenario: str,
        rest: str,
        broken: bool = False,
        trust: float = 1.0,
        pinned: bool = False,
        version: int = 1,
        updated_at: datetime | None = None,
        filed: Need | None = None,
        indexed: bool = False,
        words: tuple[str, ...] | None = None,
        run_count: int = 0,
        bound: tuple[int | None, float, float] = (None, 0.0, 0.0),
        sortkey: float = 0.0,
        home: list[Entry] | None = None,
        _marks: int | None = None,  # as another Entry holds them (dataclasses.replace)
    ) -> None:
        self.card_id = card_id
        self.kind = kind
        self.confidence = confidence
        self.seen_at = seen_at
        self.use_count = use_count
        self.evidence_count = evidence_count
        self.compiled = compiled
        self.scenario = scenario
        self.rest = rest
        self.broken = broken
        self.trust = trust
        self.updated_at = updated_at
        self.filed = filed
        self.words = words
        self.run_count = run_count
        self.bound = bound
        self.sortkey = sortkey
        self.home = home
        self.key_uses = -1  # a new card's keys are made for it: none assumes a use to come
        if _marks is None:
            _marks = version << 2 | (_PINNED if pinned else 0) | (_INDEXED if indexed else 0)
        self._marks = _marks

    @property
    def pinned(self) -> bool:
        """Never withheld by the holdout."""
        return bool(self._marks & _PINNED)

    @pinned.setter
    def pinned(self, value: bool) -> None:
        self._marks = self._marks | _PINNED if value else self._marks & ~_PINNED

    @property
    def indexed(self) -> bool:
        """Filed in its snapshot's index (a broken card never is)."""
        return bool(self._marks & _INDEXED)

    @indexed.setter
    def indexed(self, value: bool) -> None:
        self._marks = self._marks | _INDEXED if value else self._marks & ~_INDEXED

    @property
    def version(self) -> int:
        """The card's version when read."""
        return self._marks >> 2

    @version.setter
    def version(self, value: int) -> None:
        self._marks = value << 2 | self._marks & 3

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
    e.key_uses = -1
    if e.home is not None:  # its place in the ordered lists may now be too low
        e.home.append(e)


def used(e: Entry, now: datetime) -> None:
    """One use of the card, in place: its count and last use. Its places in the ordered lists
    are moved (`touched`) only once the count passes what its keys assume (`key_uses`): a
    card served every few queries was moved after each, a third of a query's CPU at 5k cards."""
    e.use_count += 1
    e.seen_at = now
    if e.use_count > e.key_uses:
        touched(e)


def _gc_untrack() -> Callable[[object], None] | None:
    """CPython's PyObject_GC_UnTrack (None on another interpreter)."""
    api = getattr(ctypes, "pythonapi", None)
    untrack = getattr(api, "PyObject_GC_UnTrack", None)
    if untrack is None:
        return None
    untrack.argtypes, untrack.restype = [ctypes.py_object], None
    return untrack  # type: ignore[no-any-return]


_UNTRACK = _gc_untrack()


def untracked(cards: list[Entry]) -> list[Entry]:
    """The list itself, out of the cycle collector's sight: it is still freed by reference
    counts (a list of cards is in no cycle: no card refers back to a list holding it). Every
    collection walked the young lists of cards made since the last (an ordered list copied by a
    fold, an index list replaced by a change), reading each card's header: 1-10 ms a collection
    at 100k cards, the plain queries' p99."""
    if _UNTRACK is not None and gc.is_tracked(cards):
        _UNTRACK(cards)
    return cards
