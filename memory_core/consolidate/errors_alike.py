"""Which errors two cards warn of, and whether they are the same ones.

Every merge path (equal structure, cosine, word overlap, the judge) asks this first: two
warnings of different errors before the same call are two lessons. Merged, the survivor would
name one error, warn of both and pool the evidence of each ("payment declined" absorbed into
"service unavailable" because the scenarios shared their words).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from memory_core.consolidate.rows import CardRow
from memory_core.task_state import normalise_error

_WORD = re.compile(r"[a-z0-9]+")
# two wordings of one error ("payment declined" / "the payment was declined") share most of
# their words; two errors of one tool rarely share half of them
ALIKE_WORDS = 0.5


def error_key(mode: dict[str, Any]) -> str:
    """A failure mode's error as a signature: ids, numbers and quoted values masked."""
    return normalise_error(str(mode.get("mode", "")))


def errors_of(row: CardRow) -> frozenset[str]:
    """The normalised errors a card warns of (none for a card that only says what worked)."""
    return errors_in(row.failure_modes)


def errors_in(modes: Iterable[dict[str, Any]]) -> frozenset[str]:
    """The normalised errors of a list of failure modes."""
    return frozenset(k for k in (error_key(m) for m in modes) if k)


def _words(signature: str) -> frozenset[str]:
    return frozenset(_WORD.findall(signature))


def _covered(ours: Iterable[str], theirs: frozenset[str]) -> bool:
    """Every error of ours is one of theirs, or shares at least ALIKE_WORDS of its words."""
    for e in ours:
        if e in theirs:
            continue
        w = _words(e)
        if not any(
            len(w & (t := _words(other))) / max(len(w | t), 1) >= ALIKE_WORDS for other in theirs
        ):
            return False
    return True


def same_errors(a: CardRow, b: CardRow) -> bool:
    """Both cards warn of no error, or each error of one is (a wording of) one of the other's."""
    return same_error_sets(errors_of(a), errors_of(b))


def same_error_sets(ea: frozenset[str], eb: frozenset[str]) -> bool:
    """same_errors on errors already normalised (a card compared with many normalises once)."""
    if not ea or not eb:
        return not ea and not eb
    return _covered(ea, eb) and _covered(eb, ea)


def union_failure_modes(lists: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every distinct error once, by its signature ("card 1234 declined" and "card 99
    declined" are one), the first handling kept."""
    seen: dict[str, dict[str, Any]] = {}
    for modes in lists:
        for m in modes:
            seen.setdefault(error_key(m), m)
    return list(seen.values())
