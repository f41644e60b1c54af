"""Preconditions: CEL expressions over the task state, normalised, capped, compiled once."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import cel

from memory_core import cel_regex
from memory_core.cel_programs import STRING_LITERAL, Unusable, compile_cached
from memory_core.cel_programs import CompiledPrecondition as CompiledPrecondition
from memory_core.cel_programs import compile_stored as compile_stored
from memory_core.cel_programs import scan_variables as scan_variables
from memory_core.errors import InvalidPrecondition

MAX_PRECONDITIONS = 12  # per card

_OPENERS, _CLOSERS = "([{", ")]}"


def normalise_text(value: str) -> str:
    """The canonical form of a string compared by preconditions: case-folded, spaces collapsed."""
    return " ".join(value.casefold().split())


def normalise_value(value: Any) -> Any:
    """Normalise every string inside a task-state value (lists and maps included)."""
    if isinstance(value, str):
        return normalise_text(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)  # CEL never compares int with double; JSON often sends 3.0 for 3
    if isinstance(value, Mapping):
        return {str(k): normalise_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [normalise_value(v) for v in value]
    return value


def normalise_expression(expression: str) -> str:
    """Lower-case the string literals of an expression so they compare with a normalised state."""

    def _lower(match: re.Match[str]) -> str:
        if "b" in match.group("prefix").lower():
            return match.group(0)  # bytes literals are compared as written
        body = normalise_text(match.group("body"))
        return f"{match.group('prefix')}{match.group('quote')}{body}{match.group('quote')}"

    return STRING_LITERAL.sub(_lower, " ".join(expression.split()))


def _depth(expression: str) -> int:
    """Nesting depth of brackets plus the number of boolean operators, outside string literals."""
    bare = STRING_LITERAL.sub('""', expression)
    depth = deepest = 0
    for ch in bare:
        if ch in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif ch in _CLOSERS:
            depth -= 1
    return deepest + bare.count("&&") + bare.count("||") + bare.count("?")


class Verdict(StrEnum):
    """The result of one precondition on one task state."""

    held = "held"
    failed = "failed"
    missing = "missing"
    error = "error"


@dataclass(frozen=True)
class Check:
    """One precondition's verdict, with the missing variables or the error when there is one."""

    expression: str
    verdict: Verdict
    missing: tuple[str, ...] = ()
    detail: str = ""


def compile_precondition(
    expression: str, *, max_chars: int = 512, max_depth: int = 8
) -> CompiledPrecondition:
    """Normalise, cap and compile one expression; raises InvalidPrecondition naming the problem."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidPrecondition(
            "a precondition must be a non-empty string", field="preconditions"
        )
    if len(expression) > max_chars:
        raise InvalidPrecondition(
            f"precondition is {len(expression)} characters, the cap is {max_chars}",
            field="preconditions",
        )
    source = normalise_expression(expression)
    if _depth(source) > max_depth:
        raise InvalidPrecondition(
            f"precondition {expression!r} nests deeper than {max_depth}", field="preconditions"
        )
    return compile_cached(source)


def compile_all(
    expressions: Sequence[str],
    *,
    max_chars: int = 512,
    max_depth: int = 8,
    max_count: int = MAX_PRECONDITIONS,
) -> list[CompiledPrecondition]:
    """Compile a card's preconditions, refusing duplicates' noise and too many of them."""
    if len(expressions) > max_count:
        raise InvalidPrecondition(
            f"{len(expressions)} preconditions, the cap is {max_count}", field="preconditions"
        )
    compiled: dict[str, CompiledPrecondition] = {}
    for expr in expressions:
        c = compile_precondition(expr, max_chars=max_chars, max_depth=max_depth)
        compiled.setdefault(c.source, c)
    return list(compiled.values())


def make_context(state: Mapping[str, Any], *, normalised: bool = False) -> cel.Context:
    """Build the evaluation context for one task state (normalised once, reused for every card;
    normalised: the caller already did, as retrieval does for its index lookups)."""
    context = cel.Context(dict(state) if normalised else normalise_value(dict(state)))
    context.add_function(cel_regex.FUNCTION, cel_regex.search)  # see memory_core.cel_regex
    return context


def check(
    compiled: CompiledPrecondition, context: cel.Context, state_keys: frozenset[str]
) -> Check:
    """Evaluate one precondition; a variable the state lacks makes it false ('missing')."""
    missing = tuple(sorted(compiled.variables - state_keys))
    if missing:
        return Check(compiled.source, Verdict.missing, missing)
    program = compiled.program
    if isinstance(program, Unusable):
        return Check(compiled.source, Verdict.error, detail=program.reason)
    try:
        result = program.execute(context)
    except (RuntimeError, KeyError) as exc:  # a map key the state lacks
        return Check(compiled.source, Verdict.missing, (str(exc).strip("'\""),))
    except TypeError as exc:
        return Check(compiled.source, Verdict.error, detail=str(exc).split(".")[0])
    if result is True:
        return Check(compiled.source, Verdict.held)
    if result is False:
        return Check(compiled.source, Verdict.failed)
    return Check(compiled.source, Verdict.error, detail=f"evaluates to {result!r}, not a boolean")


def holds_all(
    compiled: Sequence[CompiledPrecondition], context: cel.Context, state_keys: frozenset[str]
) -> bool:
    """True when every precondition holds on the state (an empty list holds)."""
    return all(check(c, context, state_keys).verdict is Verdict.held for c in compiled)
