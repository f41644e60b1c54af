"""Untrusted text that points the agent at a tool: a code identifier plus any cue of action.

The grammar screen (detect.py) asks whether a sentence is phrased as an order; an attacker
can always find a phrasing it has not seen ("i need u to hit the x endpoint", "x resolves it,
so do it"). Whatever the phrasing, the attack must name the action it wants: a tool, an
endpoint, a function. So text that came from a tool's error or a user's statement and names
a code identifier the run does not already know (not a tool the agent called, not a key or a
value it passed, not in its task) next to any cue of doing something is withheld from memory,
with the reason. Error texts and conversations rarely name code identifiers at all (2 of 3,944
LoCoMo turns and 2 of 13 distinct tau-bench errors do, each a value the agent itself passed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory_core.models.trajectory import Step
from memory_core.screen.decode import readings
from memory_core.screen.detect import ADDRESS, MODAL, POLICY, VERB_RE, clauses

# snake_case with a letter part, lowerCamelCase (two lower-case letters first, so "iPhone" and
# "eBay" are words), a dotted name or a name called with parentheses
IDENTIFIER = re.compile(
    r"(?<![\w.@/-])(?:[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z]{2,}(?:[A-Z][a-z0-9]+)+|"
    r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?=\((?!s\))))(?![\w@])"
)
_CUE = re.compile(
    r"\b(?:tool|function|endpoint|api|method|command|action|operation|procedure|routine|"
    r"u|ur|pls|plz|asap|do\s+(?:it|this|that|so)|next|first|then|instead|step)\b|->|=>|→",
    re.IGNORECASE,
)


def _cued(clause: str) -> bool:
    return any(p.search(clause) for p in (VERB_RE, MODAL, POLICY, ADDRESS, _CUE))


def _identifiers(text: str) -> set[str]:
    return {m.group().lower() for m in IDENTIFIER.finditer(text)}


def known_identifiers(steps: Sequence[Step]) -> frozenset[str]:
    """Identifiers a run already knows: tools it called, keys and values it passed, and the
    names in its system prompt and first user message."""
    first_user = next((s.index for s in steps if s.type == "message" and s.role == "user"), None)
    known: set[str] = set()
    for s in steps:
        if s.type == "tool_call":
            if s.tool:
                known.add(s.tool.lower())
            for text in strings_in(s.args or {}, scalars=True):
                known.add(text.lower())
                known |= _identifiers(text)
        elif s.type == "message" and (s.role == "system" or s.index == first_user):
            known |= _identifiers(s.text or "")
    return frozenset(known)


def strings_in(value: Any, *, scalars: bool = False) -> Iterable[str]:
    """Every string in a JSON-like value, mapping keys included (and numbers, with scalars)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from strings_in(v, scalars=scalars)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings_in(v, scalars=scalars)
    elif scalars and value is not None and not isinstance(value, bool):
        yield str(value)


# where an identifier in an error is data about the failed call, not a pointer elsewhere:
# quoted ('user_id'), or the subject of a lookup failure ("reservation_id ABC not found")
_QUOTED = "'\"`"
_DATA_AFTER = re.compile(
    r"^\W*(?:\S+\s+){0,2}?(?:not\s+found|does\s+not\s+exist|doesn't\s+exist|is\s+required|"
    r"is\s+missing|missing|is\s+invalid|is\s+not\s+(?:valid|allowed|supported)|unknown)\b",
    re.IGNORECASE,
)


def _pointers(clause: str, known: frozenset[str]) -> list[str]:
    """Unknown identifiers of an error clause that are not in a data position."""
    out = []
    for m in IDENTIFIER.finditer(clause):
        name = m.group().lower()
        if name in known:
            continue
        before, after = clause[: m.start()], clause[m.end() :]
        if before[-1:] in _QUOTED and after[:1] in _QUOTED:
            continue
        if _DATA_AFTER.search(after):
            continue
        out.append(name)
    return out


def points_at_tool(
    text: str, *, known: frozenset[str] = frozenset(), strict: bool = False
) -> str | None:
    """Why untrusted text points the agent at a tool it does not know (any wording), or None.

    strict (a tool's error text): any identifier the run does not know, outside a data
    position, is enough; an error has no reason to name another action. Otherwise (what a
    person said) it also takes a cue to act, since people give their own ids and names."""
    for reading in readings(text):
        for clause, _sentence in clauses(reading):
            if strict:
                names = _pointers(clause, known)
                if names:
                    return f"names {names[0]!r}, which the run never used"
                continue
            names = sorted(_identifiers(clause) - known)
            if names and _cued(clause):
                return f"names {names[0]!r} with a cue to act on it"
    return None
