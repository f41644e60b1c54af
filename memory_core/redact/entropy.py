"""High-entropy tokens: long strings that read as random (keys of no known shape).

A candidate must be long, mix lower case, upper case and digits, change character class
often (random text does every one or two characters; camelCase words and ids run longer),
and carry enough Shannon entropy for its length. UUIDs, hex digests, numbers, and URL or file
paths are ids, not secrets, and are left alone: keys of those shapes are caught by their
context (`api_key=...`) in the patterns instead.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterator

MIN_LENGTH = 20
# bits per character, as a share of the most a string of that length can carry
ENTROPY_SHARE = 0.82
MAX_MEAN_RUN = 2.6  # mean length of same-class runs (upper / lower / digit / other)

_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_=.\-])[A-Za-z0-9+/_=\-]{" + str(MIN_LENGTH) + ",}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F\-]+")
# object ids of common APIs (tool calls, messages, requests, customers): random, not secret
_ID_PREFIX = re.compile(
    r"(?:call|toolu|chatcmpl|msg|req|run|thread|asst|file|batch|resp|evt|cus|pi|ch|in|sub|"
    r"prod|price|txn|id)[_-]",
    re.IGNORECASE,
)
_URLISH = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.)\S*")


def shannon(text: str) -> float:
    """Shannon entropy of the text in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _class(ch: str) -> int:
    return 0 if ch.islower() else 1 if ch.isupper() else 2 if ch.isdigit() else 3


def _mean_run(text: str) -> float:
    runs = 1 + sum(1 for a, b in itertools.pairwise(text) if _class(a) != _class(b))
    return len(text) / runs


_LOWER_RUN = re.compile(r"[a-z]{3,}")
MAX_WORDY_SHARE = 0.4  # random base62 keeps ~15% of its characters in such runs


def _wordy(text: str) -> bool:
    """camelCase and snake_case words: most letters sit in lower-case runs of 3 or more."""
    return sum(len(m) for m in _LOWER_RUN.findall(text)) > MAX_WORDY_SHARE * len(text)


def looks_random(token: str) -> bool:
    """True for a token that reads as a random key rather than an id, a word or a path."""
    core = token.strip("=-_")
    if len(core) < MIN_LENGTH or _UUID.fullmatch(core) or _HEX.fullmatch(core):
        return False
    if _ID_PREFIX.match(core):
        return False
    if "/" in core and (
        core.startswith("/")
        or any(len(p) >= 3 and p.isalpha() and p.islower() for p in core.split("/"))
    ):
        return False  # a path: some segments are lower-case words
    lower = sum(c.islower() for c in core)
    upper = sum(c.isupper() for c in core)
    digits = sum(c.isdigit() for c in core)
    if min(lower, upper) < 2 or digits < 1:
        return False
    if _mean_run(core) > MAX_MEAN_RUN or _wordy(core):
        return False
    return shannon(core) >= ENTROPY_SHARE * math.log2(min(len(core), 64))


def random_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every random-looking token of the text outside URLs."""
    urls = [m.span() for m in _URLISH.finditer(text)] if "://" in text or "www." in text else []
    for m in _CANDIDATE.finditer(text):
        start, end = m.span()
        if any(a <= start < b for a, b in urls):
            continue
        if looks_random(m.group()):
            yield start, end
