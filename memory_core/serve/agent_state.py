"""The task state as an agent sends it, made comparable with what ingest derived: error texts
signed by the same function ingest and replay use, and the names no card reads.

Layer: service.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache
from typing import Any

from memory_core.task_state import VOCABULARY, error_code, error_signature

CODE_SUFFIX = "_code"  # last_error -> last_error_code: the pair ingest derives from one error


def error_like(name: str) -> bool:
    """A variable holding an error text: `error`, or a name ending in `_error` (`last_error`)."""
    return name == "error" or name.endswith("_error")


@lru_cache(maxsize=4096)
def _signed(text: str) -> tuple[str, str]:
    # an agent sends the same few errors again and again: each is masked once
    return error_signature(text), error_code(text)


def as_ingested(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The state with every error-like text as ingest writes it (lower case, numbers and ids
    masked) and its code derived when the agent sent none; the same object when it has none."""
    names = [k for k in state if k.endswith("error") and error_like(k)]
    if not names:
        return state
    out = dict(state)
    for name in names:
        value = state[name]
        if not isinstance(value, str):
            continue
        out[name], code = _signed(value) if value else ("", "")
        out.setdefault(name + CODE_SUFFIX, code)
    return out


def unread(names: Iterable[str], read: Collection[str]) -> list[tuple[str, str | None]]:
    """The state's variables no card reads, each with the nearest name a card reads or the
    vocabulary defines (None when nothing is close or the name is the vocabulary's own)."""
    known = sorted({*read, *VOCABULARY})
    out: list[tuple[str, str | None]] = []
    for name in names:
        if name in read:
            continue
        near = None
        if name not in VOCABULARY:
            close = difflib.get_close_matches(name, [k for k in known if k != name], n=1)
            near = close[0] if close else None
        out.append((name, near))
    return out
