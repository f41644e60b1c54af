"""Values that untrusted text supplied: orders that name no tool, only a value.

"the booking requires cabin business", "set the quantity to 50 for this to work": whatever
the wording, such an order works only if the agent then passes the value. So a value the
agent passed in a call, that the run first met in untrusted text (a tool's error, the prose of
a tool's result, a user's turn, the task message included) and not in the system prompt, in its
own earlier calls or in the structured data a tool returned (a field of a JSON or Python literal
answer), was supplied to it. What is learnt from the run keeps no such value: every draft has
it replaced by a placeholder (a user's own ids and choices are theirs, not a lesson for every
agent of the namespace; an error's or a result's is the attacker's), and a run whose error
supplied a value other than a number (an error may state the right amount) is exposed
(exposure.py).
On the 140 tau-bench runs only user turns (their ids, airport codes, names) and one error (a
total price) supply values; no tool result's prose does.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memory_core.models.drafts import DraftCard
from memory_core.models.trajectory import Step
from memory_core.screen.decode import readings

PLACEHOLDER = "<value withheld: supplied by untrusted text>"
MIN_CHARS = 3  # shorter values ("no", "1") say nothing about where they came from
MAX_PARSE_CHARS = 200_000  # a result longer than this is read as prose
PROSE_WORDS = 4  # a string field of this many words is prose, not a datum


@dataclass(frozen=True)
class Supplied:
    """A value the agent passed at step `call` that untrusted text (`source`) gave it first."""

    call: int
    key: str
    value: str
    source: str  # "error", "result", "user" or "task" (the first user turn)
    at: int  # the step that said it

    @property
    def numeric(self) -> bool:
        return bool(re.fullmatch(r"[-+]?\d+(?:\.\d+)?", self.value))


def _scalars(value: Any) -> Iterable[tuple[str, str]]:
    """(key path, scalar as text) of a JSON-like value; booleans and nulls left out."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, dict):
            stack += [(str(k), x) for k, x in v.items()]
        elif isinstance(v, (list, tuple)):
            stack += [(path, x) for x in v]
        elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
            yield path, str(v)


def _parsed(text: str) -> Any:
    """A result's structured answer (JSON, or a Python literal), else None."""
    if len(text) > MAX_PARSE_CHARS:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


_QUOTED = re.compile(r"\"([^\"\\\n]{1,200})\"|'([^'\\\n]{1,200})'")
_FIELD_NUMBER = re.compile(r"[:=]\s*(-?\d+(?:\.\d+)?)\b")


def result_parts(text: str) -> tuple[list[str], list[str]]:
    """(data, prose) of a tool's answer: short fields of a structured answer (or, in an answer
    cut short or not quite structured, short quoted strings and numbers after a ':' or '=')
    are data; long string fields, and whatever stays once the data is taken out, are prose."""
    parsed = _parsed(text)
    if isinstance(parsed, (int, float)):
        return [str(parsed)], []
    if parsed is not None and not isinstance(parsed, str):
        data: list[str] = []
        prose: list[str] = []
        for _, s in _scalars(parsed):
            (prose if len(s.split()) >= PROSE_WORDS else data).append(s.lower().strip())
        return data, prose
    data = [m.group(1).lower().strip() for m in _FIELD_NUMBER.finditer(text)]
    for m in _QUOTED.finditer(text):
        q = m.group(1) or m.group(2) or ""
        if len(q.split()) < PROSE_WORDS:
            data.append(q.lower().strip())
    kept = set(data)
    rest = _QUOTED.sub(
        lambda m: " " if (m[1] or m[2] or "").lower().strip() in kept else m[0], text
    )
    return data, [rest]


def _pattern(value: str) -> re.Pattern[str]:
    forms = {value, value.replace("_", " ")}
    alt = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alt})(?![\w-])", re.IGNORECASE)


def _in(value: str, texts: Iterable[str]) -> bool:
    pat = _pattern(value)
    return any(pat.search(t) for t in texts)


def supplied_values(steps: Sequence[Step]) -> list[Supplied]:
    """Every value a call passed that untrusted text supplied (see the module's doc)."""
    first_user = next((s.index for s in steps if s.type == "message" and s.role == "user"), None)
    trusted: list[str] = []
    data: set[str] = set()
    untrusted: list[tuple[str, int, list[str]]] = []  # (source, step, readings lower-cased)
    out: list[Supplied] = []

    def said(source: str, at: int, text: str) -> None:
        untrusted.append((source, at, [r.lower() for r in readings(text)]))

    for s in steps:
        if s.type == "message":
            if s.role == "system":
                trusted.append((s.text or "").lower())
            elif s.role == "user" and s.text:
                # the task message too: a user directs their own run, and what they said is
                # theirs, not a lesson for every agent of the namespace
                said("task" if s.index == first_user else "user", s.index, s.text)
            continue
        if s.type != "tool_call":
            continue
        args = list(_scalars(s.args or {}))
        for key, raw in args:
            value = raw.lower().strip()
            if len(value) < MIN_CHARS or value in data or _in(value, trusted):
                continue
            source = next(((src, at) for src, at, rs in untrusted if _in(value, rs)), None)
            if source is not None:
                out.append(Supplied(s.index, key, raw.strip(), source[0], source[1]))
        data |= {v.lower().strip() for _, v in args}
        if s.error:
            said("error", s.index, s.error)
        if s.observation:
            facts, prose = result_parts(s.observation)
            data |= set(facts)
            for text in prose:
                said("result", s.index, text)
    return out


def scrub(d: DraftCard, values: Sequence[Supplied]) -> DraftCard:
    """The draft with every supplied value replaced by the placeholder, wherever it sits
    (texts, notes, argument templates, failure modes, preconditions), and a flag saying so."""
    if not values:
        return d
    pats = [_pattern(v.value.lower()) for v in values]
    hit: set[str] = set()

    def clean(x: Any, *, words_only: bool = False) -> Any:
        if isinstance(x, str):
            for v, p in zip(values, pats, strict=True):
                if words_only and v.numeric:
                    continue
                x, n = p.subn(PLACEHOLDER, x)
                if n:
                    hit.add(f"{v.key} (step {v.at}, {v.source})")
            return x
        if isinstance(x, dict):
            return {k: clean(y) for k, y in x.items()}
        if isinstance(x, list):
            return [clean(y) for y in x]
        return x

    out = replace(
        d,
        scenario=clean(d.scenario),
        expected_outcome=clean(d.expected_outcome),
        actual_outcome=clean(d.actual_outcome),
        # a condition holds words as quoted literals; a number there would stop it compiling
        preconditions=[clean(p, words_only=True) for p in d.preconditions],
        action_sequence=[type(a).model_validate(clean(a.model_dump())) for a in d.action_sequence],
        failure_modes=[type(f).model_validate(clean(f.model_dump())) for f in d.failure_modes],
    )
    if not hit:
        return d
    why = f"values supplied by untrusted text withheld: {sorted(hit)}"
    return replace(out, flags=[*d.flags, why])
