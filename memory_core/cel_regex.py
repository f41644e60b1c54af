"""`x.matches("...")` without CEL's cost: a regular expression searched by Python's `re`.

The CEL engine compiles a `matches` pattern on every evaluation (~17 us, ~70 us on a busy
host, against ~0.3 us for an equality), and an identifier's kind, the usual key of a lesson
about a call, is such a pattern. A precondition that is exactly `PATH.matches("LITERAL")`, with
a pattern in the part of the syntax where the engine's regular expressions and Python's agree,
is compiled as `SEARCH(PATH, "P")`: a string is searched by a cached Python pattern, and a
value that is not a string fails (CEL, which has no `matches` for it, reported the call as a
missing variable). A path the state lacks is missing as before. Any other pattern or
expression is left to CEL.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

FUNCTION = "hs_regex_search"  # not a CEL function a stored precondition may name

_PATH = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\"(?:[^\"\\]|\\.)*\"\])*"
_CALL = re.compile(rf'^(?P<path>{_PATH})\.matches\((?P<literal>"(?:[^"\\]|\\[\\"])*")\)$')
# the pieces both engines read alike: escaped punctuation, decimal digits (Unicode in both),
# counted repeats, non-capturing groups, classes of plain characters and plain characters
_SAFE_PIECE = re.compile(
    r"""\\d|\\[^A-Za-z0-9]|\{\d+(?:,\d*)?\}|\(\?:|[\w .*+?|()\[\]^,:/@#%=&'<>~!;"-]""",
    re.ASCII,
)
_CLASS_SET_OPS = ("&&", "--", "~~", "[[", "[:")  # the engine's class syntax Python lacks


def _python_pattern(pattern: str) -> str | None:
    """The pattern for Python's `re` (a final `$` as `\\Z`: the end of the text, never before
    a last newline), or None when the two engines might read it differently."""
    if any(op in pattern for op in _CLASS_SET_OPS):
        return None
    body = pattern[:-1] if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    pos = 0
    while pos < len(body):
        piece = _SAFE_PIECE.match(body, pos)
        if piece is None:
            return None
        if piece.group() == "^" and pos != 0 and body[pos - 1] != "[":
            return None  # a caret elsewhere: literal in one engine's class, an anchor in the other
        if piece.group() == "(" and body.startswith("?", piece.end()):
            return None  # flags, names, look-arounds: not read alike (or not at all)
        pos = piece.end()
    python = body + ("\\Z" if body is not pattern else "")
    try:
        re.compile(python)
    except re.error:
        return None
    return python


def fast_source(source: str) -> str | None:
    """The expression to compile in place of a plain `PATH.matches("...")`, else None."""
    call = _CALL.match(source)
    if call is None:
        return None
    python = _python_pattern(json.loads(call["literal"]))
    if python is None:
        return None
    return f"{FUNCTION}({call['path']}, {json.dumps(python)})"


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def search(text: object, pattern: str) -> bool:
    """Whether the pattern occurs in the text (CEL's `matches`: anywhere, unless anchored);
    a value that is not a string is no such text."""
    return isinstance(text, str) and _compiled(pattern).search(text) is not None
