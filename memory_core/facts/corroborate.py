"""Corroboration: what a person says is their claim until something other than their word agrees.

A fact read from a conversation is served as a fact only when a successful tool result about
its subject (a call in the same run that passed the subject's id) holds every word of its
value, or when another speaker states the same value of the same subject and key (a person
repeating themselves in another conversation is still one source). The check is on words, so
it errs towards leaving a fact a claim: "a Gold member" is corroborated by
`{"membership": "gold"}`, never by a record without "gold".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_WORD = re.compile(r"[a-z0-9]+")
_FILLER = {
    "a", "an", "the", "of", "yes", "fan", "my", "our", "to", "and", "or", "is", "are", "in",
    "at", "on", "for", "with",
}  # fmt: skip
_NEGATED = re.compile(r"(?i)^\s*no\b|,\s*not\s|\binstead\b")
_MIN_STEM = 4  # "member" matches "membership"; shorter words must match whole


@dataclass(frozen=True)
class ToolResult:
    """A successful tool call of a run that passed the subject's id, and what it returned."""

    step: int
    tool: str
    words: frozenset[str]


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def subject_results(steps: Iterable[Mapping[str, Any]], subject: str) -> list[ToolResult]:
    """The run's successful tool results about the subject (calls passing its id)."""
    out = []
    for step in steps:
        if step.get("type") != "tool_call" or step.get("error") or not step.get("observation"):
            continue
        args = step.get("args") or {}
        if not any(isinstance(v, (str, int)) and str(v) == subject for v in args.values()):
            continue
        out.append(
            ToolResult(
                step=int(step.get("index") or 0),
                tool=str(step.get("tool") or ""),
                words=frozenset(_words(str(step["observation"]))),
            )
        )
    return out


def claimed_words(value: str) -> list[str]:
    """The words a value asserts ("yes (Terraform)" -> terraform); none for a negation, which
    a record's words cannot confirm."""
    if _NEGATED.search(value):
        return []
    return [w for w in _words(value) if w not in _FILLER]


def _found(word: str, words: frozenset[str]) -> bool:
    if word in words:
        return True
    if len(word) < _MIN_STEM:
        return False
    return any(w.startswith(word) or (len(w) >= _MIN_STEM and word.startswith(w)) for w in words)


def corroboration(value: str, results: Iterable[ToolResult]) -> dict[str, Any] | None:
    """The first tool result holding every word the value asserts, as provenance; or None."""
    wanted = claimed_words(value)
    if not wanted:
        return None
    for r in results:
        if all(_found(w, r.words) for w in wanted):
            return {"by": "tool_result", "tool": r.tool, "step": r.step}
    return None
