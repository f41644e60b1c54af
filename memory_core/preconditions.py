"""Preconditions: CEL expressions over the task state, normalised, capped, compiled once."""

from __future__ import annotations

import re
import threading
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

import cel

from memory_core.errors import InvalidPrecondition

MAX_PRECONDITIONS = 12  # per card

# CEL string literals: raw/plain, single/double/triple quoted (the CEL spec's lexical forms)
_STRING_LITERAL = re.compile(
    r"""(?P<prefix>[rRbB]{0,2})(?P<quote>'''|\"\"\"|'|")(?P<body>(?:\\.|(?!(?P=quote)).)*?)(?P=quote)""",
    re.DOTALL,
)
_OPENERS, _CLOSERS = "([{", ")]}"
# CEL's standard functions; anything else would only fail later, at query time
# fmt: off
_STANDARD_FUNCTIONS = frozenset([
    "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string",
    "bool", "bytes", "type", "dyn", "has", "timestamp", "duration", "exists", "all",
    "exists_one", "map", "filter", "getFullYear", "getMonth", "getDayOfMonth", "getDayOfWeek",
    "getDayOfYear", "getHours", "getMinutes", "getSeconds", "getMilliseconds", "getDate",
])
# fmt: on


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

    return _STRING_LITERAL.sub(_lower, " ".join(expression.split()))


def _depth(expression: str) -> int:
    """Nesting depth of brackets plus the number of boolean operators, outside string literals."""
    bare = _STRING_LITERAL.sub('""', expression)
    depth = deepest = 0
    for ch in bare:
        if ch in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif ch in _CLOSERS:
            depth -= 1
    return deepest + bare.count("&&") + bare.count("||") + bare.count("?")


class CompiledPrecondition:
    """A normalised expression with its compiled program and the variables it reads."""

    __slots__ = ("__weakref__", "program", "source", "variables")

    def __init__(
        self, source: str, program: cel.Program | _Unusable, variables: frozenset[str]
    ) -> None:
        self.source = source
        self.program = program
        self.variables = variables

    @property
    def compiled(self) -> bool:
        """Whether the program was compiled (or found not to compile) already."""
        return not isinstance(self, _OnUse)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompiledPrecondition) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    def __repr__(self) -> str:
        return f"CompiledPrecondition({self.source!r})"


class _OnUse(CompiledPrecondition):
    """A stored text whose program is compiled on first read, when it becomes a plain
    CompiledPrecondition: a snapshot of a million cards compiles only what its queries reach
    (a program costs ~20 us and ~2 KB; a few hundred thousand texts sit idle), and a read
    after that is a slot's (a property cost every evaluation ~85 ns)."""

    __slots__ = ()

    def __init__(self, source: str, variables: frozenset[str]) -> None:
        self.source = source
        self.variables = variables

    def __getattr__(self, name: str) -> cel.Program | _Unusable:
        """Called only while `program` is unset: compile it (one that does not compile
        raises TypeError when executed)."""
        if name != "program":
            raise AttributeError(name)
        try:
            program: cel.Program | _Unusable = _compile(self.source)
        except InvalidPrecondition as exc:
            program = _Unusable(str(exc))
        self.program = program
        object.__setattr__(self, "__class__", CompiledPrecondition)  # same slots: reads skip this
        _compiled_on_use(self)
        return program


# programs compiled on use, oldest first: past MAX_ON_USE the oldest is dropped and compiled
# again if a query reaches it (~16 us), so a server whose queries reach every text of a
# million cards (~259k texts, ~2 KB a program) holds ~130 MB of programs, not ~500
MAX_ON_USE = 65_536
_ON_USE: deque[weakref.ref[CompiledPrecondition]] = deque()
_ON_USE_LOCK = threading.Lock()


def _compiled_on_use(c: CompiledPrecondition) -> None:
    with _ON_USE_LOCK:
        _ON_USE.append(weakref.ref(c))
        while len(_ON_USE) > MAX_ON_USE:
            old = _ON_USE.popleft()()
            if old is not None and type(old) is CompiledPrecondition:
                # the class first: a reader between the two lines still finds the program in
                # its slot; once the slot is empty, _OnUse.__getattr__ compiles it again
                object.__setattr__(old, "__class__", _OnUse)
                del old.program


class _Unusable:
    """The program of a stored text that no longer compiles: it never holds (check says why)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def execute(self, context: cel.Context) -> object:
        """Raise the compile error as an evaluation error (callers catch TypeError)."""
        raise TypeError(self.reason)


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
    return _compile_cached(source)


def compile_stored(source: str, *, on_use: bool = False) -> CompiledPrecondition:
    """Compile an expression that was already normalised and capped when its card was stored
    (raises InvalidPrecondition); on_use: its program is compiled on first use instead, and a
    text that no longer compiles then never holds (a snapshot reaches few of its texts)."""
    if not on_use:
        return _compile_cached(source)
    variables = scan_variables(source)
    if variables is None:  # a shape the scan does not read exactly: compile now
        try:
            program = _compile(source)
        except InvalidPrecondition as exc:
            return CompiledPrecondition(source, _Unusable(str(exc)), frozenset())
        return CompiledPrecondition(source, program, _shared(frozenset(program.variables())))
    return _OnUse(source, variables)


_IDENTIFIER = re.compile(r"(\.\s*)?\b([A-Za-z_][A-Za-z0-9_]*)\b(\s*\()?")
_NOT_SCANNED = re.compile(r"\{|(?:^|[^\w\s)\]])\s*\.\s*[A-Za-z_]")  # messages, leading dots
_RESERVED = frozenset({"true", "false", "null", "in"})
# the variable sets of a load are few (tool, tool and error code, ...): one object each
_VARIABLE_SETS: dict[frozenset[str], frozenset[str]] = {}


def scan_variables(source: str) -> frozenset[str] | None:
    """The variables CEL reports for an expression (every identifier neither a member nor a
    call), read without compiling; None for message literals and leading-dot names."""
    bare = _STRING_LITERAL.sub('""', source)
    if _NOT_SCANNED.search(bare):
        return None
    found = frozenset(
        m.group(2)
        for m in _IDENTIFIER.finditer(bare)
        if not m.group(1) and not m.group(3) and m.group(2) not in _RESERVED
    )
    return _shared(found)


def _shared(variables: frozenset[str]) -> frozenset[str]:
    if len(_VARIABLE_SETS) > 100_000:  # a pathological store: stop sharing, never grow
        return variables
    return _VARIABLE_SETS.setdefault(variables, variables)


@lru_cache(maxsize=65536)
def _compile_cached(source: str) -> CompiledPrecondition:
    program = _compile(source)
    return CompiledPrecondition(source, program, _shared(frozenset(program.variables())))


def _compile(source: str) -> cel.Program:
    """Compile a normalised expression; raises InvalidPrecondition naming the problem."""
    try:
        program = cel.compile(source)
    except ValueError as exc:
        first_line = str(exc).splitlines()[0]
        raise InvalidPrecondition(
            f"precondition {source!r} does not compile: {first_line}", field="preconditions"
        ) from exc
    unknown = sorted(
        f
        for f in program.functions()
        if f not in _STANDARD_FUNCTIONS
        and f.strip("_@!-").isidentifier()
        and f not in ("@in", "@not_strictly_false")
    )
    if unknown:
        raise InvalidPrecondition(
            f"precondition {source!r} calls unknown function(s) {', '.join(unknown)}",
            field="preconditions",
        )
    return program


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


def make_context(state: Mapping[str, Any]) -> cel.Context:
    """Build the evaluation context for one task state (normalised once, reused for every card)."""
    return cel.Context(normalise_value(dict(state)))


def check(
    compiled: CompiledPrecondition, context: cel.Context, state_keys: frozenset[str]
) -> Check:
    """Evaluate one precondition; a variable the state lacks makes it false ('missing')."""
    missing = tuple(sorted(compiled.variables - state_keys))
    if missing:
        return Check(compiled.source, Verdict.missing, missing)
    program = compiled.program
    if isinstance(program, _Unusable):
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
