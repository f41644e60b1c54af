"""Equality atoms: the `var == literal` conjuncts a precondition cannot hold without.

A card is a retrieval candidate only when the state satisfies one of its atoms, so a query
evaluates the few cards whose atoms match instead of every card of the namespace. Only atoms
that are top-level conjuncts count: `a == "x" && b > 1` needs `a == "x"`, while
`a == "x" || b > 1` does not, so an expression with a top-level `||` or `?:` gives none.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

# (type tag, value): CEL never finds "3" equal to 3, nor true equal to 1
AtomKey = tuple[str, Hashable]
Atom = tuple[str, AtomKey]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_LITERAL = r"\"[^\"\\]*\"|'[^'\\]*'|-?\d+|true|false"
_ATOM = re.compile(
    rf"^\(?\s*(?:({_IDENT})\s*==\s*({_LITERAL})|({_LITERAL})\s*==\s*({_IDENT}))\s*\)?$"
)
_RESERVED = frozenset({"true", "false", "null", "in"})


def literal_key(text: str) -> AtomKey | None:
    """The index key of a CEL literal as written in a normalised expression."""
    if text[0] in "\"'":
        return ("s", text[1:-1])
    if text in ("true", "false"):
        return ("b", text == "true")
    try:
        return ("i", int(text))
    except ValueError:
        return None


def state_key(value: Any) -> AtomKey | None:
    """The index key of a (normalised) task-state value, or None when no atom can equal it."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, str):
        return ("s", value)
    return None


def _top_level(expression: str) -> tuple[list[str], bool]:
    """Split on top-level `&&`; the flag says a top-level `||` or `?` makes the split unsafe."""
    parts: list[str] = []
    depth, start, i, quote = 0, 0, 0, ""
    while i < len(expression):
        ch = expression[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expression.startswith("&&", i):
            parts.append(expression[start:i])
            start, i = i + 2, i + 2
            continue
        elif depth == 0 and (expression.startswith("||", i) or ch == "?"):
            return [], True
        i += 1
    parts.append(expression[start:])
    return parts, False


def equality_atoms(expression: str) -> list[Atom]:
    """The atoms a normalised expression needs to hold: [(variable, literal key)]."""
    parts, unsafe = _top_level(expression)
    if unsafe:
        return []
    atoms: list[Atom] = []
    for part in parts:
        m = _ATOM.match(part.strip())
        if m is None:
            continue
        var, lit = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        key = literal_key(lit)
        if key is not None and var not in _RESERVED:
            atoms.append((var, key))
    return atoms
