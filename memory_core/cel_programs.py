"""Compiled CEL programs: compiling a normalised expression, the variables it reads (one
shared set object per distinct set), and stored texts compiled on first use, capped."""

from __future__ import annotations

import re
import threading
import weakref
from collections import deque
from functools import lru_cache

import cel

from memory_core.cel_regex import fast_source
from memory_core.errors import InvalidPrecondition

# CEL string literals: raw/plain, single/double/triple quoted (the CEL spec's lexical forms)
STRING_LITERAL = re.compile(
    r"""(?P<prefix>[rRbB]{0,2})(?P<quote>'''|\"\"\"|'|")(?P<body>(?:\\.|(?!(?P=quote)).)*?)(?P=quote)""",
    re.DOTALL,
)
# CEL's standard functions; anything else would only fail later, at query time
# fmt: off
_STANDARD_FUNCTIONS = frozenset([
    "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string",
    "bool", "bytes", "type", "dyn", "has", "timestamp", "duration", "exists", "all",
    "exists_one", "map", "filter", "getFullYear", "getMonth", "getDayOfMonth", "getDayOfWeek",
    "getDayOfYear", "getHours", "getMinutes", "getSeconds", "getMilliseconds", "getDate",
])
# fmt: on


class CompiledPrecondition:
    """A normalised expression with its compiled program and the variables it reads."""

    __slots__ = ("__weakref__", "program", "source", "variables")

    def __init__(
        self, source: str, program: cel.Program | Unusable, variables: frozenset[str]
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

    def __getattr__(self, name: str) -> cel.Program | Unusable:
        """Called only while `program` is unset: compile it (one that does not compile
        raises TypeError when executed)."""
        if name != "program":
            raise AttributeError(name)
        try:
            program: cel.Program | Unusable = compile_program(self.source)
        except InvalidPrecondition as exc:
            program = Unusable(str(exc))
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


class Unusable:
    """The program of a stored text that no longer compiles: it never holds (check says why)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def execute(self, context: cel.Context) -> object:
        """Raise the compile error as an evaluation error (callers catch TypeError)."""
        raise TypeError(self.reason)


def compile_stored(source: str, *, on_use: bool = False) -> CompiledPrecondition:
    """Compile an expression that was already normalised and capped when its card was stored
    (raises InvalidPrecondition); on_use: its program is compiled on first use instead, and a
    text that no longer compiles then never holds (a snapshot reaches few of its texts)."""
    if not on_use:
        return compile_cached(source)
    variables = scan_variables(source)
    if variables is None:  # a shape the scan does not read exactly: compile now
        try:
            program = compile_program(source)
        except InvalidPrecondition as exc:
            return CompiledPrecondition(source, Unusable(str(exc)), frozenset())
        return CompiledPrecondition(source, program, _read_variables(source, program))
    return _OnUse(source, variables)


_IDENTIFIER = re.compile(r"(\.\s*)?\b([A-Za-z_][A-Za-z0-9_]*)\b(\s*\()?")
_NOT_SCANNED = re.compile(r"\{|(?:^|[^\w\s)\]])\s*\.\s*[A-Za-z_]")  # messages, leading dots
_RESERVED = frozenset({"true", "false", "null", "in"})
# the variable sets of a load are few (tool, tool and error code, ...): one object each
_VARIABLE_SETS: dict[frozenset[str], frozenset[str]] = {}


def on_use_scanned(source: str, variables: frozenset[str]) -> CompiledPrecondition:
    """A stored text whose variables were scanned before (a saved snapshot): compiled on first
    use, without scanning it again (the scan was most of a load from the file)."""
    return _OnUse(source, _shared(variables))


def scan_variables(source: str) -> frozenset[str] | None:
    """The variables CEL reports for an expression (every identifier neither a member nor a
    call), read without compiling; None for message literals and leading-dot names."""
    bare = STRING_LITERAL.sub('""', source)
    if _NOT_SCANNED.search(bare):
        return None
    found = frozenset(
        m.group(2)
        for m in _IDENTIFIER.finditer(bare)
        if not m.group(1) and not m.group(3) and m.group(2) not in _RESERVED
    )
    return _shared(found - _loop_variables(bare))


# a macro's loop variable (`tools_used.filter(t, t == "x")`): CEL lists it among the variables
# though the state never holds it, which made every such precondition read as 'missing'
_MACRO_LOOP = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,")


def _loop_variables(source: str) -> frozenset[str]:
    return frozenset(_MACRO_LOOP.findall(STRING_LITERAL.sub('""', source)))


def _read_variables(source: str, program: cel.Program) -> frozenset[str]:
    return _shared(frozenset(program.variables()) - _loop_variables(source))


def _shared(variables: frozenset[str]) -> frozenset[str]:
    if len(_VARIABLE_SETS) > 100_000:  # a pathological store: stop sharing, never grow
        return variables
    return _VARIABLE_SETS.setdefault(variables, variables)


@lru_cache(maxsize=65536)
def compile_cached(source: str) -> CompiledPrecondition:
    program = compile_program(source)
    return CompiledPrecondition(source, program, _read_variables(source, program))


def compile_program(source: str) -> cel.Program:
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
    fast = fast_source(source)  # checked as written above; run as the cheaper equivalent
    return program if fast is None else cel.compile(fast)
