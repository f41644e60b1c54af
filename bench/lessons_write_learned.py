"""Learned write signals for bench/lessons_write_signals.py: attributes of a write whose
failed-run share, learned on other tasks by run outcome alone (as the memory learns), might
tell a wrong write of a tool from a right one."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from bench.lessons_writes import is_write

ID_LIKE = re.compile(r"^(?=.*\d)[\w\-]{3,}$")  # letters or digits, with a digit: an identifier
MIN_VALUE_CHARS = 2
_CATEGORY = re.compile(r"^[^\d]{1,24}$")  # a short text without digits: a category, not an id


def leaves(value: Any) -> Iterator[str]:
    """The argument's leaf values as text (strings and numbers; booleans and nulls are flags)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(int(value)) if float(value).is_integer() else str(value)
    elif len(str(value).strip()) >= MIN_VALUE_CHARS:
        yield str(value).strip()


def target_attributes(call: Any, b: Any) -> set[str]:
    """The observed record of the object the write names: the last earlier read result (a JSON
    object) holding one of the call's identifier values at its top level; its other top-level
    categorical fields (short text without digits, booleans) as `key=value`."""
    ids = {v for v in leaves(call.args) if ID_LIKE.match(v)}
    for s in reversed(b.calls):
        if is_write(s.tool) or not (s.observation or "").lstrip().startswith("{"):
            continue
        try:
            record = json.loads(s.observation)
        except ValueError:
            continue
        if not isinstance(record, dict) or not ids & {str(v) for v in record.values()}:
            continue
        return {
            f"{k}={str(v).lower()}"
            for k, v in record.items()
            if isinstance(v, bool) or (isinstance(v, str) and _CATEGORY.match(v))
        }
    return set()


def argument_attributes(call: Any, b: Any) -> set[str]:
    """The call's own categorical argument values as `key=value` (what keys test today)."""
    return {
        f"{k}={str(v).lower()}"
        for k, v in (call.args or {}).items()
        if isinstance(v, bool) or (isinstance(v, str) and _CATEGORY.match(v))
    }


ATTRIBUTES = {"argument values": argument_attributes, "target's observed fields": target_attributes}


def learned_scores(rows: list[dict[str, Any]], learn: list[dict[str, Any]], folds: int = 5) -> None:
    """Per held-out fold of tasks, each write's score from the other folds' runs alone, by run
    outcome only (as the memory learns): the largest share of failed runs, (f) / (f + s + 1),
    among the tool's writes sharing an attribute seen in failed runs of >= 2 tasks."""
    groups = sorted({r["group"] for r in rows}, key=str)
    fold = {g: i % folds for i, g in enumerate(groups)}
    for name in ATTRIBUTES:
        for k in range(folds):
            fail: dict[tuple[str, str], set[str]] = defaultdict(set)
            runs: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
            for r in learn:
                if fold.get(r["group"]) == k:
                    continue
                for a in r["_attrs"][name]:
                    runs[(r["tool"], a)][r["_failed"]] += 1
                    if r["_failed"]:
                        fail[(r["tool"], a)].add(r["group"])
            for r in rows:
                if fold[r["group"]] != k:
                    continue
                r[f"learned: {name}"] = max(
                    (
                        runs[(r["tool"], a)][1] / (sum(runs[(r["tool"], a)]) + 1)
                        for a in r["_attrs"][name]
                        if len(fail[(r["tool"], a)]) >= 2
                    ),
                    default=0.0,
                )
