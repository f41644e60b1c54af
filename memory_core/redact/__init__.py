"""Secrets out of everything derived: one redaction function for cards, facts, prompts, answers.

`redact(text)` replaces every credential it finds with `[REDACTED:<kind>]` and keeps the
words around it, so a card still reads ("log in with [REDACTED:password_in_text]"). The
stored raw trajectory is kept as submitted; what is derived from it (the extractors' view,
the LLM prompt, facts, cards) and what is served passes through here first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memory_core.redact import patterns, shapes
from memory_core.redact.entropy import random_spans
from memory_core.redact.prose import prose_spans
from memory_core.text_memo import text_memo

MARKER = "[REDACTED:"
_MARKERS = re.compile(r"\[REDACTED:[a-z_]+\]")
# prose and assignments catch "the password is <value>": these values are words, not secrets
_WORDS = """
a an the is was not no none null nil true false yes empty blank unset set reset changed same
different wrong incorrect invalid valid expired required missing correct right weak strong
hidden stored saved needed optional necessary mandatory sensitive case-sensitive too also
still now here there this that these those it its mine yours his hers ours theirs my your
our their what which who unknown redacted masked hashed encrypted protected secure insecure
safe unsafe long short ok okay fine good bad new old default custom changed. being been be
will would should could must can may might and or but for from with without of on in at to
by as into about over under again once never always sent shown displayed generated rotated
revoked active inactive disabled enabled locked unlocked verified
"""
_PLAIN_WORDS = frozenset(_WORDS.split())
PATTERNS = (*patterns.PATTERNS, *shapes.PATTERNS, *shapes.PROVIDERS)
_CHECKED = ("assigned_secret", "password_in_text", "env_secret", "cli_password")
_ALL_HINTS = frozenset(h for p in PATTERNS for h in p.hints)
_NEED_DIGIT = ("pin", "otp", "code")  # nouns whose values are numbers when they are secrets


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret found in a text: its kind and where it is."""

    kind: str
    start: int
    end: int


def _plain(value: str, context: str) -> bool:
    low = value.lower().strip(".!?)")
    if low.startswith(MARKER.lower()) or low in _PLAIN_WORDS or set(low) <= {"*", "x", "•"}:
        return True
    words = context.lower().split()
    needs_digit = any(w.startswith(_NEED_DIGIT) for w in words) and not any(
        w.startswith(("pass", "pwd", "secret", "token", "key")) for w in words
    )
    return needs_digit and not any(c.isdigit() for c in value)


def find_secrets(text: str) -> list[Finding]:
    """Every secret in the text, without overlaps, in order."""
    found: list[Finding] = []
    low = text.lower()
    gates: dict[re.Pattern[str], bool] = {}
    present = {h for h in _ALL_HINTS if h in low}  # each hint looked for once per text
    for p in PATTERNS:
        if p.hints and present.isdisjoint(p.hints):
            continue
        if p.gate is not None:
            if p.gate not in gates:
                gates[p.gate] = p.gate.search(text) is not None
            if not gates[p.gate]:
                continue
        for m in p.regex.finditer(text):
            start, end = m.span(p.group)
            if start < 0:
                continue
            if p.kind in _CHECKED and _plain(
                m.group(p.group), m.group(0)[: m.start(p.group) - m.start()]
            ):
                continue
            found.append(Finding(p.kind, start, end))
    found.extend(
        Finding("password_in_text", a, b)
        for a, b in prose_spans(text, low)
        if not _plain(text[a:b], "")
    )
    found.extend(Finding("high_entropy", a, b) for a, b in random_spans(text))
    if MARKER in text:  # redacting a redacted text changes nothing: markers are not secrets
        marks = [m.span() for m in _MARKERS.finditer(text)]
        found = [f for f in found if not any(a < f.end and f.start < b for a, b in marks)]
    found.sort(key=lambda f: (f.start, -f.end))
    merged: list[Finding] = []
    for f in found:
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            if f.end > last.end:
                merged[-1] = Finding(last.kind, last.start, f.end)
            continue
        merged.append(f)
    return merged


# the same short texts are redacted over and over: a batch's evidence rows repeat their
# conditions and arguments, and a task's runs share their messages (the writer's evidence
# rows alone were a quarter of a 2,500-run night). Bounded: 16k texts of at most 1,000 chars.
@text_memo(16_384, max_chars=1_000)
def redact(text: str) -> str:
    """The text with every secret replaced by `[REDACTED:<kind>]`; idempotent."""
    if not text:
        return text
    findings = find_secrets(text)
    if not findings:
        return text
    out: list[str] = []
    pos = 0
    for f in findings:
        out.append(text[pos : f.start])
        out.append(f"{MARKER}{f.kind}]")
        pos = f.end
    out.append(text[pos:])
    return "".join(out)


def has_secret(text: str) -> bool:
    """True when the text holds something that reads as a credential."""
    return bool(text) and bool(find_secrets(text))


def redact_value(value: Any) -> Any:
    """A JSON value with every string in it (keys too) redacted; other values as they were."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value


def only_redacted(text: str) -> bool:
    """True when the text is nothing but redaction markers (and punctuation): no fact left."""
    if MARKER not in text:
        return False
    rest = _MARKERS.sub("", text)
    return not any(c.isalnum() for c in rest)


def count_redacted(texts: Iterable[str]) -> int:
    """How many redaction markers the texts carry (what a benchmark or a report counts)."""
    return sum(t.count(MARKER) for t in texts)
