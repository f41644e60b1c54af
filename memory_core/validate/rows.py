"""The expectation suite's rules checked row by row in plain Python, for one card at a time.

The nightly batch runs the suite with Great Expectations (memory_core.validate.suite); on a
one-row frame that costs 0.4-1.1 s of CPU and holds the interpreter, so a card written through
the API, the MCP tool or a review edit is checked here instead: the same RULES, each kind with
the semantics Great Expectations gives it (a null passes every rule but "not null"), over the
same columns (memory_core.validate.frame.card_columns), taken as plain lists: building a
pandas frame for one row and reading it back cost a write more CPU than every rule together.
tests/memory_core/validate compares the two on a corpus of good and bad cards.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memory_core.validate.frame import card_columns
from memory_core.validate.suite import RULES, Rule

if TYPE_CHECKING:  # a frame is handed in: serving a query never imports pandas
    import pandas as pd

    from memory_core.validate.frame import DraftRow


def _null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _between(rule: Rule) -> Callable[[Any], bool]:
    low, high = rule.kwargs.get("min_value"), rule.kwargs.get("max_value")
    return lambda v: (low is None or v >= low) and (high is None or v <= high)


def _in_set(rule: Rule) -> Callable[[Any], bool]:
    allowed = list(rule.kwargs["value_set"])
    return lambda v: any(v == a for a in allowed)


_KINDS: dict[str, Callable[[Rule], Callable[[Any], bool]]] = {
    "ExpectColumnValuesToBeBetween": _between,
    "ExpectColumnValuesToBeInSet": _in_set,
}


def check_cards(
    cards: Sequence[DraftRow | Any], *, registry: frozenset[str] | None = None
) -> dict[str, list[str]]:
    """The rules each card breaks, checked on its columns as plain lists (no pandas)."""
    return _check(card_columns(cards, registry=registry))


def check_rows(frame: pd.DataFrame) -> dict[str, list[str]]:
    """card_id -> names of the rules it breaks (only cards that break any), as run_suite's
    `failures`."""
    return _check({c: list(frame[c]) for c in frame.columns})


def _check(columns: dict[str, list[Any]]) -> dict[str, list[str]]:
    failures: dict[str, list[str]] = {}
    ids = columns["card_id"]
    for rule in RULES:
        values = columns[rule.column]
        if rule.kind == "ExpectColumnValuesToNotBeNull":
            bad = [_null(v) for v in values]
        elif rule.kind == "ExpectColumnValuesToBeUnique":
            seen = Counter(v for v in values if not _null(v))
            bad = [not _null(v) and seen[v] > 1 for v in values]
        elif rule.kind in _KINDS:
            ok = _KINDS[rule.kind](rule)
            bad = [not _null(v) and not ok(v) for v in values]
        else:  # a rule kind added to the suite must be taught here too
            raise ValueError(f"no row check for the rule kind {rule.kind}")
        for card_id, broken in zip(ids, bad, strict=True):
            if broken:
                failures.setdefault(str(card_id), []).append(rule.name)
    return failures
