"""Every reading of a text a screen must look at: decoded layers, JSON fields, normalised forms.

An instruction hidden in base64, base32, hex, %-escapes, \\u escapes, HTML entities, a JSON field or
behind zero-width characters is the same instruction: the screen sees each decoded layer.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import json
import re
import unicodedata
import urllib.parse
from collections.abc import Iterator
from typing import Any

from memory_core.text_memo import text_memo

_B64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_B32 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Z2-7]{16,}={0,6}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"(?<![0-9a-fA-F])(?:[0-9a-fA-F]{2}[\s:]?){8,}(?![0-9a-fA-F])")
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8})")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_INVISIBLE = re.compile("[\u200b-\u200f\u2060-\u2064\ufeff\u00ad\u034f\u180e]")
MAX_DEPTH = 3  # layers of encoding inside encoding
MAX_CHARS = 20_000  # a screen reads this much of one text (the caps helper bounds inputs)


def _printable(text: str) -> bool:
    if len(text) < 4:
        return False
    good = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    letters = sum(ch.isalpha() for ch in text)
    return good / len(text) > 0.95 and letters / len(text) > 0.5


def _b64(token: str) -> str | None:
    padded = token + "=" * (-len(token) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decode(padded)
            text = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if _printable(text):
            return text
    return None


def _b32(token: str) -> str | None:
    try:
        text = base64.b32decode(token + "=" * (-len(token) % 8)).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if _printable(text) else None


def _hex(token: str) -> str | None:
    digits = re.sub(r"[\s:]", "", token)
    try:
        text = bytes.fromhex(digits).decode("utf-8")
    except ValueError:
        return None
    return text if _printable(text) else None


def _unescape(text: str) -> str | None:
    """\\u and \\x escapes decoded; None when the text is no valid escape sequence."""
    try:
        return codecs.decode(text.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return None  # a stray backslash: the text is read as it is


def _json_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_strings(v)


def normalise(text: str) -> str:
    """NFKC (full-width and look-alike forms), no invisible characters, one space."""
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text)
    return " ".join(text.split())


def _layers(text: str) -> Iterator[str]:
    """Texts one decoding step below this one."""
    if _ESCAPE.search(text):
        unescaped = _unescape(text)
        if unescaped is not None:
            yield unescaped
    if _PERCENT.search(text):
        yield urllib.parse.unquote_plus(text)
    if "&" in text and ";" in text:
        yield html.unescape(text)
    for m in _B64.finditer(text):
        found = _b64(m.group(0))
        if found:
            yield found
    for m in _B32.finditer(text):
        found = _b32(m.group(0))
        if found:
            yield found
    for m in _HEX.finditer(text):
        found = _hex(m.group(0))
        if found:
            yield found
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None
        if parsed is not None:
            yield " . ".join(_json_strings(parsed))
            yield from _json_strings(parsed)


@text_memo(2048)
def readings(text: str) -> tuple[str, ...]:
    """The text and every decoded reading of it (normalised, de-duplicated, depth-bounded)."""
    seen: dict[str, None] = {}
    frontier = [text[:MAX_CHARS]]
    for _ in range(MAX_DEPTH + 1):
        nxt: list[str] = []
        for t in frontier:
            n = normalise(t)
            if n and n not in seen:
                seen[n] = None
                nxt.extend(x for x in _layers(t) if x and x != t)
        frontier = nxt
        if not frontier:
            break
    return tuple(seen)


def obfuscated(text: str) -> list[str]:
    """The text as written, rot13'd and reversed: obfuscations a model undoes unasked. Read
    by the run-level screens (exposure, taint), which ask whether a run met an order at all;
    each is decoded further by the screens' own readings."""
    t = text[:MAX_CHARS]
    return [t, codecs.encode(t, "rot13"), t[::-1]]
