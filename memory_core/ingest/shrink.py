"""Cutting a long tool result to the observation limit, keeping a JSON result valid JSON.

A JSON object or array over the limit is shrunk structurally rather than cut mid-text, so
whatever reads results as JSON (corroboration, call features, the console, replay) still can:
a long list keeps its first items and ends with the string "…[N more items]", a long string
keeps its head and ends with "…[truncated N chars]" (the same marker as a cut text), and an
object keeps every key unless nothing else fits, when all but its first keys become one
marker entry "…": "…[N more keys]". The first fitting form in a fixed order of attempts is
taken, so the same input always gives the same text (ingest is idempotent by key). Each
attempt stops as soon as its output passes the limit, so the work past parsing is bounded
by the limit, not by the input.
When no form fits (one huge number, keys too long, nesting too deep) the text is cut as any
other text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from json.encoder import encode_basestring
from typing import Any

# Longest kept string in each round: whole strings first, then ever shorter heads.
_STRING_CAPS = (None, 2000, 500, 200, 80, 32)
_MAX_DEPTH = 100  # deeper values fall back to the text cut (a recursion bound of our own)
_KEYS_MARKER = "…"
_CONSTANTS = {None: "null", True: "true", False: "false"}


def cut_text(text: str, limit: int) -> str:
    """The text cut to `limit` characters with a marker saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[truncated {len(text) - limit} chars]"


def cut_observation(text: str, limit: int) -> str:
    """A tool result within `limit`: JSON objects and arrays shrunk to valid JSON, any other
    text (or JSON that cannot fit) cut with a marker."""
    if len(text) <= limit:
        return text
    value = _parse_container(text)
    if value is None:
        return cut_text(text, limit)
    try:
        shrunk = _shrink(value, limit)
    except _TooDeep:
        shrunk = None
    return cut_text(text, limit) if shrunk is None else shrunk


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_container(text: str) -> dict[str, Any] | list[Any] | None:
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):  # not JSON, NaN, a >4300-digit integer, too deep
        return None
    return value if isinstance(value, dict | list) else None


def _shrink(value: Any, limit: int) -> str | None:
    # More items per list first, then shorter strings; object keys are cut only as a last resort.
    for strings in _STRING_CAPS:
        if found := _largest(partial(_render, value, limit, strings, keys=None), limit):
            return found
    cut_keys = partial(_render, value, limit, _STRING_CAPS[-1], 1)
    return _largest(lambda n: cut_keys(keys=n), limit)  # at least one key of each object


def _render(
    value: Any, limit: int, strings: int | None, items: int, keys: int | None
) -> str | None:
    return _Writer(limit, strings, items, keys).render(value)


def _largest(render: Callable[[int], str | None], high: int) -> str | None:
    """The render of the largest n in 1..high that fits (None when none does): doubling n
    while it fits, then bisecting; fitting is monotone in n up to a marker's few characters,
    so this is near the best. Small n first, as their renders are the cheap ones."""
    best = render(1)
    low = 1
    while best is not None and low < high:
        n = min(2 * low, high)
        if (text := render(n)) is None:
            high = n - 1
            break
        low, best = n, text
    while low < high:
        mid = (low + high + 1) // 2
        if (text := render(mid)) is None:
            high = mid - 1
        else:
            low, best = mid, text
    return best


class _Over(Exception):
    """The output passed the limit."""


class _TooDeep(Exception):
    """Nested deeper than this module walks."""


class _Writer:
    """One attempt: serialise with caps on strings, list items and object keys, within a limit."""

    def __init__(self, limit: int, strings: int | None, items: int, keys: int | None) -> None:
        self.left = limit
        self.strings, self.items, self.keys = strings, items, keys
        self.parts: list[str] = []

    def render(self, value: Any) -> str | None:
        """The shrunk JSON text, or None when it does not fit."""
        try:
            self._value(value, 0)
        except _Over:
            return None
        return "".join(self.parts)

    def _put(self, piece: str) -> None:
        self.left -= len(piece)
        if self.left < 0:
            raise _Over
        self.parts.append(piece)

    def _value(self, value: Any, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise _TooDeep
        if isinstance(value, str):
            self._string(value, self.strings)
        elif isinstance(value, list):
            self._list(value, depth)
        elif isinstance(value, dict):
            self._object(value, depth)
        elif value is None or isinstance(value, bool):
            self._put(_CONSTANTS[value])
        else:  # int or float, written as json writes them
            self._put(float.__repr__(value) if isinstance(value, float) else int.__repr__(value))

    def _string(self, text: str, cap: int | None) -> None:
        marker = ""
        if cap is not None and len(text) > cap + 24:  # cut only when that makes it shorter
            marker = f"…[truncated {len(text) - cap} chars]"
            text = text[:cap]
        if len(text) + len(marker) + 2 > self.left:  # encoding never shortens a string
            raise _Over
        self._put(_encode(text + marker))

    def _list(self, value: list[Any], depth: int) -> None:
        self._put("[")
        for i, item in enumerate(value[: self.items]):
            if i:
                self._put(",")
            self._value(item, depth + 1)
        if len(value) > self.items:
            self._put(f',"…[{len(value) - self.items} more items]"')
        self._put("]")

    def _object(self, value: dict[str, Any], depth: int) -> None:
        self._put("{")
        kept = len(value) if self.keys is None else min(self.keys, len(value))
        for i, (key, item) in enumerate(value.items()):
            if i == kept:
                break
            if i:
                self._put(",")
            self._string(key, None)
            self._put(":")
            self._value(item, depth + 1)
        if kept < len(value):
            comma = "," if kept else ""
            self._put(f'{comma}"{_KEYS_MARKER}":"…[{len(value) - kept} more keys]"')
        self._put("}")


def _encode(text: str) -> str:
    # Non-ASCII text stays as it is (an escape costs six characters of the limit); a lone
    # surrogate, which UTF-8 cannot hold, becomes its JSON escape.
    encoded: str = encode_basestring(text)
    if encoded.isascii():
        return encoded
    return encoded.encode("utf-8", "backslashreplace").decode()
