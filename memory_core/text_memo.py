"""Memoised pure functions of one text: the screens read the same texts many times over.

A run's tool result is read by the taint, exposure, pointer and value screens, each through
every decoded reading of it, and a task's sibling runs share most of their texts, so one
batch asked for the same readings and verdicts thousands of times (0.2 s a run). The cache is
bounded in entries, and texts longer than the screens read are never kept, so memory stays
bounded whatever the input.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")
MAX_KEPT_CHARS = 4_000  # a longer text is computed each time, not kept (memory stays small)


def text_memo(
    maxsize: int, *, max_chars: int = MAX_KEPT_CHARS
) -> Callable[[Callable[[str], R]], Callable[[str], R]]:
    """Decorate a pure function of one text (its result must not be mutated by callers);
    texts longer than max_chars are computed each time."""

    def wrap(fn: Callable[[str], R]) -> Callable[[str], R]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(text: str) -> R:
            return cached(text) if len(text) <= max_chars else fn(text)

        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call

    return wrap
