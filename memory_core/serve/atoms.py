"""What a precondition cannot hold without, in shapes an index can look up.

A card is a retrieval candidate only when the state satisfies one of its needs, so a query
evaluates the few cards whose needs match instead of every card of the namespace. Only
top-level conjuncts count: `a == "x" && b > 1` needs `a == "x"` (and `b > 1`), while
`a == "x" || b > 1` needs neither. Needs: equality alternatives (`==`, `in [...]`, and a `||`
whose every branch needs an equality), numeric ranges, substrings (`contains`, `startsWith`,
`endsWith`); beyond them every variable an expression reads must be in the state.

Layer: needs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable, Iterable
from collections.abc import Set as AbstractSet
from functools import lru_cache
from typing import Any, Protocol

from memory_core.preconditions import CompiledPrecondition

# (type tag, value): CEL never finds "3" equal to 3, nor true equal to 1
AtomKey = tuple[str, Hashable]
Atom = tuple[str, AtomKey]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_LITERAL = r"\"[^\"\\]*\"|'[^'\\]*'|-?\d+|true|false"
_ATOM = re.compile(
    rf"^\(?\s*(?:({_IDENT})\s*==\s*({_LITERAL})|({_LITERAL})\s*==\s*({_IDENT}))\s*\)?$"
)
_RESERVED = frozenset({"true", "false", "null", "in"})
_NUMBER = r"-?\d+(?:\.\d+)?"
_STRING = r"\"[^\"\\]*\"|'[^'\\]*'"
_IN = re.compile(rf"^({_IDENT})\s+in\s+\[\s*((?:(?:{_LITERAL})\s*,\s*)*(?:{_LITERAL}))\s*,?\s*\]$")
_RANGE = re.compile(
    rf"^(?:({_IDENT})\s*(<=|>=|<|>)\s*({_NUMBER})|({_NUMBER})\s*(<=|>=|<|>)\s*({_IDENT}))$"
)
_SUBSTRING = re.compile(rf"^({_IDENT})\.(?:contains|startsWith|endsWith)\(\s*({_STRING})\s*\)$")
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


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


# what _split looks at: string literals (skipped whole), brackets and the three operators
_TOKENS = re.compile(r"\"(?:[^\"\\]|\\.)*\"?|'(?:[^'\\]|\\.)*'?|[()\[\]{}?]|&&|\|\|", re.DOTALL)


def _split(expression: str) -> tuple[list[str], str]:
    """Split on the top-level operator of lowest precedence: ('?', '||' or '&&')."""
    ands: list[int] = []
    ors: list[int] = []
    depth = 0
    for m in _TOKENS.finditer(expression):
        tok = m.group()
        if tok in ("(", "[", "{"):
            depth += 1
        elif tok in (")", "]", "}"):
            depth -= 1
        elif depth:
            continue
        elif tok == "?":
            return [], "?"
        elif tok == "&&":
            ands.append(m.start())
        elif tok == "||":
            ors.append(m.start())
    cuts, op = (ors, "||") if ors else (ands, "&&")
    parts, start = [], 0
    for at in cuts:
        parts.append(expression[start:at])
        start = at + 2
    parts.append(expression[start:])
    return parts, op


def _unwrap(part: str) -> str:
    """Drop brackets around a whole part: `(a && b)` is `a && b`."""
    part = part.strip()
    while part.startswith("(") and part.endswith(")"):
        inner, depth = part[1:-1], 0
        for ch in _STRING_FREE.sub('""', inner):
            depth += ch == "("
            depth -= ch == ")"
            if depth < 0:
                return part
        part = inner.strip()
    return part


_STRING_FREE = re.compile(_STRING)
# a need: ("eq", ((var, key), ...)) any of these equalities; ("range", var, op, bound);
# ("substring", var, text)
Need = tuple[Any, ...]


def _atom(part: str) -> Atom | None:
    m = _ATOM.match(part)
    if m is None:
        return None
    var, lit = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
    key = literal_key(lit)
    return (var, key) if key is not None and var not in _RESERVED else None


def _conjunct_needs(part: str) -> list[Need]:
    part = _unwrap(part)
    atom = _atom(part)
    if atom is not None:
        return [("eq", (atom,))]
    if (m := _IN.match(part)) is not None and m.group(1) not in _RESERVED:
        keys = [literal_key(lit) for lit in re.findall(_LITERAL, m.group(2))]
        if all(k is not None for k in keys):
            return [("eq", tuple(dict.fromkeys((m.group(1), k) for k in keys if k is not None)))]
    if (m := _RANGE.match(part)) is not None:
        var, op, num = (
            (m.group(1), m.group(2), m.group(3))
            if m.group(1)
            else (
                m.group(6),
                _FLIP[m.group(5)],
                m.group(4),
            )
        )
        return [("range", var, op, float(num))] if var not in _RESERVED else []
    if (m := _SUBSTRING.match(part)) is not None and m.group(1) not in _RESERVED:
        return [("substring", m.group(1), m.group(2)[1:-1])]
    if ("&&" in part or "||" in part) and len(_split(part)[0]) > 1:
        return list(needs(part))  # only a top-level operator: `f(a && b)` is one conjunct
    return []


@lru_cache(maxsize=4096)  # a load memoises by text itself (index.NeedsMemo)
def needs(expression: str) -> tuple[Need, ...]:
    """What a normalised expression cannot hold without: each need alone is necessary."""
    parts, op = _split(_unwrap(expression))
    if op == "?":
        return ()
    if op == "&&":
        return tuple(n for part in parts for n in _conjunct_needs(part))
    # a disjunction needs one of its branches' equalities: every branch must have one
    alternatives: list[Atom] = []
    for branch in parts:
        eqs = [n for n in _conjunct_needs(branch) if n[0] == "eq"]
        if not eqs:
            return ()
        alternatives.extend(min(eqs, key=lambda n: len(n[1]))[1])
    return (("eq", tuple(dict.fromkeys(alternatives))),)


def equality_atoms(expression: str) -> list[Atom]:
    """The single equalities a normalised expression needs to hold: [(variable, literal key)]."""
    parts, op = _split(expression)
    if op != "&&":
        return [] if op == "?" or len(parts) > 1 else _only_atoms(parts)
    return _only_atoms(parts)


def _only_atoms(parts: list[str]) -> list[Atom]:
    return [a for part in parts if (a := _atom(part.strip())) is not None]


class NeedsMemo:
    """What one load has worked out once: needs by text, and one object per distinct need (a
    million cards repeat a few)."""

    def __init__(self) -> None:
        self.texts: dict[str, tuple[Need, ...]] = {}
        self.shared: dict[Need, Need] = {}
        self.atoms: dict[Atom, Atom] = {}
        self.has: dict[str, Need] = {}

    def one(self, need: Need) -> Need:
        """The load's one object equal to need (and to each equality in it: `tool in [a, b]`
        and `tool == a` hold the same atom)."""
        if (found := self.shared.get(need)) is not None:
            return found
        if need[0] == "eq":
            need = ("eq", tuple(self.atoms.setdefault(a, a) for a in need[1]))
        return self.shared.setdefault(need, need)

    def of_text(self, source: str) -> tuple[Need, ...]:
        """A precondition text's needs, the load's objects."""
        if (found := self.texts.get(source)) is None:
            found = self.texts[source] = tuple(self.one(n) for n in needs(source))
        return found


class Conditioned(Protocol):
    """What a card's needs are read from: its compiled preconditions (serve/entry.py)."""

    @property
    def compiled(self) -> tuple[CompiledPrecondition, ...]: ...


class Stats:
    """How many cards share each equality and each variable: what makes a need selective."""

    def __init__(self) -> None:
        self.atoms: Counter[tuple[str, AtomKey]] = Counter()

    def add(self, card: Iterable[Need]) -> None:
        """Count one card's equalities."""
        for n in card:
            if n[0] == "eq":
                self.atoms.update(n[1])

    def remove(self, card: Iterable[Need]) -> None:
        """Uncount one card's equalities (it left the served set or changed)."""
        for n in card:
            if n[0] == "eq":
                self.atoms.subtract(n[1])
                for a in n[1]:
                    if self.atoms[a] <= 0:
                        del self.atoms[a]

    def cost(self, need: Need) -> tuple[int, int]:
        """(shape, cards sharing it): the lower, the fewer queries it lets through. An
        equality beats a range, a range a substring, a substring a mere variable; among
        equalities the rarest (its alternatives' cards summed) keeps candidate lists short."""
        kind = need[0]
        if kind == "eq":
            return 0, sum(self.atoms[a] for a in need[1])
        return {"window": 1, "substring": 2, "range": 3}.get(kind, 4), 0


def card_needs(e: Conditioned, memo: NeedsMemo | None = None) -> list[Need]:
    """Every need of a card: its preconditions' needs, a window where a variable is bounded
    on both sides, then each variable it reads (memo: for a whole load)."""
    if memo is None:
        out: list[Need] = [n for c in e.compiled for n in needs(c.source)]
    else:
        out = [n for c in e.compiled for n in memo.of_text(c.source)]
    lows = {n[1]: n[3] for n in out if n[0] == "range" and n[2][0] == ">"}
    for n in out:
        if n[0] == "range" and n[2][0] == "<" and n[1] in lows and lows[n[1]] <= n[3]:
            window = ("window", n[1], lows[n[1]], n[3])
            out.append(window if memo is None else memo.one(window))
            break
    variables: AbstractSet[str] = (
        e.compiled[0].variables
        if len(e.compiled) == 1
        else {v for c in e.compiled for v in c.variables}
    )
    if memo is None:
        out += [("has", v) for v in sorted(variables)]
    else:  # the texts' needs are the load's objects already: only the new ones are shared
        out += [memo.has.get(v) or memo.has.setdefault(v, ("has", v)) for v in sorted(variables)]
    return out


_NOT_YET: Need = ("not chosen yet",)


def chosen_needs(entries: Iterable[Conditioned], stats: Stats) -> list[Need | None]:
    """Each card's cheapest need (as index.choose), in the order of entries, once every
    card's equalities are counted in stats (the cards' texts' needs: what card_needs adds
    is no equality). Nothing is held per precondition tuple while the cards are counted: a
    list of needs per tuple (~500k at a million cards) freed after the load left ~70 MB of
    holes in the allocator's pools among the needs the snapshot keeps."""
    cards = list(entries)
    memo = NeedsMemo()
    atoms = stats.atoms
    held = Counter(c.source for e in cards for c in e.compiled)  # cards holding each text
    for source, n_cards in held.items():
        for n in memo.of_text(source):
            if n[0] == "eq":
                for a in n[1]:
                    atoms[a] += n_cards
    chosen: dict[tuple[Any, ...], Need | None] = {}  # by the tuple its cards share
    picks: list[Need | None] = []
    for e in cards:
        if (need := chosen.get(e.compiled, _NOT_YET)) is _NOT_YET:
            options = card_needs(e, memo)
            need = chosen[e.compiled] = min(options, key=stats.cost) if options else None
        picks.append(need)
    return picks
