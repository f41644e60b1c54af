"""Preconditions that hold on every state: a card with them is served to every query.

A set of preconditions is meant to pick the states a lesson is about. One that holds on the
empty state (`true`, `1 == 1`, no preconditions at all), or on every probe state (`step >= 0`,
`size(tools_used) >= 0`, `x == x`), or that only says a variable is not a value nobody uses
(`task_type != "zzz"`) picks none: the card would reach every query of the namespace. Such a
card is refused unless its writer says it applies everywhere.

The probes: each variable the set reads takes values of every type a task state carries
(strings, numbers, booleans, lists, maps with the fields the set reads; a variable of the
documented vocabulary only values of its type), values no literal of
the set names ("", a probe word, 0, large numbers; negative ones only for a variable outside
the documented vocabulary, whose counts and indexes never go below zero), and the literals of
the set a state really takes (`used`: every literal when the caller cannot tell, the values
the namespace has seen for a key's write). A probe on which the set cannot be evaluated (a
variable of another type) says nothing; the set holds everywhere when it held on some probe
and failed on none.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

from memory_core.cel_programs import STRING_LITERAL
from memory_core.preconditions import (
    CompiledPrecondition,
    Verdict,
    check,
    compile_all,
    make_context,
)

PROBE_WORD = "\u2063probe\u2063"  # a value no literal of a card names
NON_NEGATIVE = frozenset({"step", "error_count", "retry_count"})  # indexes and counts
# the documented vocabulary's types (memory_core.task_state): the states the product derives,
# and an agent filling the vocabulary, carry these and no others, so `type(step) == int` or
# `tool != 1` picks no states (bool is no int here)
TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("task_type", "agent_id", "tool", "last_tool", "last_error"), (str,)),
    "last_error_code": (str, int),
    **dict.fromkeys(("step", "error_count", "retry_count"), (int,)),
    "tools_used": (list,),
    "args": (dict,),
}
MAX_PROBES = 1024  # states tried per set (a product larger than this is sampled)
_NUMBER = re.compile(r"(?<![\w.\"'])-?\d+(?:\.\d+)?(?![\w.])")
EVERYWHERE = "applies_everywhere"  # the provenance field: its writer meant it for every state
ADVICE = f"a card meant for every state must say so with {EVERYWHERE}: true"


def _literals(sources: Sequence[str]) -> tuple[list[str], list[int | float]]:
    strings: list[str] = []
    numbers: list[int | float] = []
    for src in sources:
        strings += [m.group("body") for m in STRING_LITERAL.finditer(src)]
        bare = STRING_LITERAL.sub('""', src)
        for m in _NUMBER.finditer(bare):
            text = m.group()
            numbers.append(float(text) if "." in text else int(text))
    return strings, numbers


def _fields(variable: str, sources: Sequence[str]) -> list[str]:
    found: list[str] = []
    for src in sources:
        bare = STRING_LITERAL.sub('""', src)
        found += re.findall(rf"\b{re.escape(variable)}\.([A-Za-z_]\w*)", bare)
        index = rf"\b{re.escape(variable)}\[\s*(?:'([^']*)'|\"([^\"]*)\")\s*\]"
        found += [a or b for a, b in re.findall(index, src)]
    return sorted(set(found))


def _scalars(variable: str, strings: list[str], numbers: list[int | float]) -> list[Any]:
    ints: list[Any] = [0, 1, 2, 7, 100, 10**9]
    if variable not in NON_NEGATIVE:
        ints += [-1, -(10**9), 0.5, -0.5]
    for n in numbers:
        ints += [n, n + 1, n - 1]
    if variable in NON_NEGATIVE:  # `retry_count > -1` holds on every state
        ints = [n for n in ints if n >= 0]
    return ["", PROBE_WORD, *strings, *dict.fromkeys(ints), True, False]


def _values(
    variable: str, sources: Sequence[str], strings: list[str], numbers: list[int | float]
) -> list[Any]:
    scalars = _scalars(variable, strings, numbers)
    lists: list[Any] = [[], [PROBE_WORD], [0], *([s] for s in strings)]
    fields = _fields(variable, sources)
    maps: list[Any] = [{}]
    maps += [{f: v for f in fields} for v in scalars] if fields else [{PROBE_WORD: ""}]
    values = [*scalars, *lists, *maps]
    types = TYPES.get(variable)
    if types is None:  # an agent's own variable: any type
        return values
    return [
        v
        for v in values
        if isinstance(v, types)
        and not (isinstance(v, bool) and bool not in types)
        and not (isinstance(v, list) and not all(isinstance(x, str) for x in v))
    ]


def _probes(
    compiled: Sequence[CompiledPrecondition], used: Collection[str] | None
) -> Iterator[dict[str, Any]]:
    """Probe states, lazily: a set that picks states fails on one of the first few."""
    sources = [c.source for c in compiled]
    strings, numbers = _literals(sources)
    if used is not None:  # a literal no state takes is no probe: "!= 'zzz'" holds on all of them
        strings = [s for s in strings if s in used]
    variables = sorted({v for c in compiled for v in c.variables})
    choices = [_values(v, sources, strings, numbers) for v in variables]
    # every value of every variable beside the others' first value, then combinations
    for i, c in enumerate(choices):
        for v in c:
            one = [v if j == i else ch[0] for j, ch in enumerate(choices)]
            yield dict(zip(variables, one, strict=True))
    total = 1
    for c in choices:
        total *= len(c)
    if total <= MAX_PROBES:
        combos: Iterable[tuple[Any, ...]] = itertools.product(*choices)
    else:  # the same sample every time: a card is refused or accepted alike on every write
        rng = random.Random(0)
        combos = (tuple(rng.choice(c) for c in choices) for _ in range(MAX_PROBES))
    for combo in combos:
        yield dict(zip(variables, combo, strict=True))


def _verdict(compiled: Sequence[CompiledPrecondition], state: dict[str, Any]) -> Verdict:
    """held (all held), failed (one failed), else error: the probe says nothing."""
    context = make_context(state)
    keys = frozenset(state)
    verdicts = [check(c, context, keys).verdict for c in compiled]
    if Verdict.failed in verdicts:
        return Verdict.failed
    return Verdict.held if all(v is Verdict.held for v in verdicts) else Verdict.error


def holds_everywhere(
    expressions: Sequence[str], *, used: Collection[str] | None = None
) -> str | None:
    """Why the set of preconditions holds on every state (naming the rule), or None when it
    picks some states. `used`: the string values states really take (None: every literal of
    the set counts as used). Raises InvalidPrecondition when an expression does not compile."""
    if not expressions:
        return f"no preconditions: the card holds on every state; {ADVICE}"
    compiled = compile_all(list(expressions))
    shown = ", ".join(c.source for c in compiled)
    if _verdict(compiled, {}) is Verdict.held:
        return f"preconditions [{shown}] hold on the empty state {{}}: {ADVICE}"
    for c in compiled:
        if not c.variables and _verdict([c], {}) is Verdict.error:
            return f"precondition {c.source} is a constant that is not a boolean"
    held = False
    for probe in _probes(compiled, used):
        verdict = _verdict(compiled, probe)
        if verdict is Verdict.failed:
            return None  # it picks states: the usual answer, found at the first such probe
        held = held or verdict is Verdict.held
    if held:
        unused = "" if used is None else " (and a value no state of the namespace takes)"
        return (
            f"preconditions [{shown}] hold on every probe state{unused}: they pick no "
            f"states; {ADVICE}"
        )
    return None
