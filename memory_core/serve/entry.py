"""One active card as retrieval holds it in a snapshot (memory_core.serve.snapshot)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from memory_core.preconditions import CompiledPrecondition
from memory_core.serve.atoms import Need


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
    words: tuple[str, ...] | None = None  # the content words of text (keywords.term_tuple)
    run_count: int = 0  # distinct runs supporting the lesson (see support_of)
    # (its epoch's serial, the highest standing the card can have in it, the most support can
    # add): one attribute so that threads computing it for different epochs never mix
    # (serve/topk.py); atoms only, so the collector does not track it
    bound: tuple[int | None, float, float] = (None, 0.0, 0.0)
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
