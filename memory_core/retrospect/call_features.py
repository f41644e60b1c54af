"""What a call looks like, in terms that carry to other inputs: argument keys and value classes.

A value's class is what stays when the particular value goes: a short word stays as it is
(an enumerated choice such as a mode or a category), an identifier keeps its shape (a prefix
and a digit run, a fixed-length code, a date), a list its length, a number its sign. Each
class is also a CEL atom over the pre-call state (`args`), so a card can say which calls it
is about and be checked by the same precondition engine as every other card.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_WORD_CHARS = 24
MAX_WORDS = 3
_WORDISH = re.compile(r"^[a-z][a-z _\-]*$")
_PREFIXED_ID = re.compile(r"^([a-z][a-z_\-]*[_\-])(\d+)$")  # a kind, a separator, a number
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}")
_CODE = re.compile(r"^[a-z0-9]+$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# how specific an atom is, for choosing which few atoms a card keeps (lower = preferred)
RANK = {"word": 0, "bool": 1, "size": 2, "pattern": 3, "sign": 4, "key": 5}


@dataclass(frozen=True, order=True)
class Atom:
    """One feature of a call: a CEL expression over `args`, and what it says in words."""

    rank: int
    expr: str
    text: str
    kind: str
    key: str


def cel_string(value: str) -> str:
    """A CEL string literal (JSON escaping is valid CEL escaping)."""
    return json.dumps(value, ensure_ascii=False)


def _norm(value: str) -> str:
    return " ".join(value.casefold().split())


def value_class(value: Any) -> str:
    """A value's class in words: the word itself, an id's shape, a list's length, a sign."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "negative number" if value < 0 else "zero" if value == 0 else "positive number"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object with " + ", ".join(sorted(str(k) for k in value))
    text = _norm(str(value))
    if _is_word(text, str(value)):
        return f'"{text}"'
    pattern = _pattern(text)
    if pattern is not None:
        return pattern[1]
    return f"text of {len(text.split())} word(s)"


def _is_word(text: str, original: str | None = None) -> bool:
    """A short lower-case phrase (a choice among a few); an all-capitals token is a code."""
    if original is not None and any(t.isupper() and len(t) > 1 for t in original.split()):
        return False
    return (
        len(text) <= MAX_WORD_CHARS
        and len(text.split()) <= MAX_WORDS
        and bool(_WORDISH.match(text))
    )


def _pattern(text: str) -> tuple[str, str] | None:
    """(regular expression, words) for an identifier-like string, else None."""
    m = _PREFIXED_ID.match(text)
    if m and m.group(1):
        prefix = re.escape(m.group(1))
        return f"^{prefix}[0-9]+$", f"{m.group(1)}<digits>"
    if _DATETIME.match(text):
        return "^[0-9]{4}-[0-9]{2}-[0-9]{2}[t ][0-9]{2}:[0-9]{2}", "a date-time"
    if _DATE.match(text):
        return "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "a date"
    if _CODE.match(text) and len(text) <= 16:
        has_digit, has_alpha = any(c.isdigit() for c in text), any(c.isalpha() for c in text)
        chars = "a-z0-9" if has_digit and has_alpha else "0-9" if has_digit else "a-z"
        return f"^[{chars}]{{{len(text)}}}$", f"a {len(text)}-character code"
    return None


KEY_KINDS = frozenset({"word", "bool", "pattern"})


def keyable(atom: Atom) -> bool:
    """An enumerated choice, a flag or an identifier's kind (a prefix and digits): what may
    key a lesson; never a size, a sign, a fixed-length code or a date (one task's values)."""
    if atom.kind not in KEY_KINDS:
        return False
    return atom.kind != "pattern" or atom.expr.endswith('[0-9]+$")')


def atoms(args: dict[str, Any] | None) -> list[Atom]:
    """Every feature of a call's arguments as an atom (keys that are not identifiers skipped)."""
    from memory_core.retrospect.placeholders import is_placeholder

    out: list[Atom] = []
    for key in sorted(args or {}):
        if not _KEY.match(key):
            continue
        value = (args or {})[key]
        if is_placeholder(value):
            continue  # a withheld or masked value: no call passes it
        ref = f"args.{key}"
        out.append(Atom(RANK["key"], f"has({ref})", f"{key} given", "key", key))
        if isinstance(value, bool):
            lit = "true" if value else "false"
            out.append(Atom(RANK["bool"], f"{ref} == {lit}", f"{key} = {lit}", "bool", key))
        elif isinstance(value, int | float):
            sign = "> 0" if value > 0 else "< 0" if value < 0 else "== 0"
            num = f"{ref} {sign}" if sign != "== 0" else f"{ref} == 0"
            out.append(Atom(RANK["sign"], num, f"{key} {value_class(value)}", "sign", key))
        elif isinstance(value, list):
            out.append(
                Atom(
                    RANK["size"],
                    f"size({ref}) == {len(value)}",
                    f"{key}: a list of {len(value)}",
                    "size",
                    key,
                )
            )
        elif isinstance(value, str):
            text = _norm(value)
            if _is_word(text, value):
                out.append(
                    Atom(
                        RANK["word"],
                        f"{ref} == {cel_string(text)}",
                        f'{key} = "{text}"',
                        "word",
                        key,
                    )
                )
            else:
                pat = _pattern(text)
                if pat is not None:
                    out.append(
                        Atom(
                            RANK["pattern"],
                            f"{ref}.matches({cel_string(pat[0])})",
                            f"{key} is {pat[1]}",
                            "pattern",
                            key,
                        )
                    )
    return out


def changed(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """How each argument that differs changed, by class: 'k: "a" -> "b"', 'k: added', ..."""
    a, b = before or {}, after or {}
    out: list[str] = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) == b.get(k):
            continue
        if k not in a:
            out.append(f"{k}: added ({value_class(b[k])})")
        elif k not in b:
            out.append(f"{k}: dropped")
        else:
            ca, cb = value_class(a[k]), value_class(b[k])
            if ca != cb:
                out.append(f"{k}: {ca} -> {cb}")
            elif isinstance(a[k], str) and isinstance(b[k], str):
                out.append(f"{k}: another {ca}" + _text_change(a[k], b[k]))
            elif isinstance(a[k], int | float) and isinstance(b[k], int | float):
                out.append(f"{k}: {'larger' if b[k] > a[k] else 'smaller'} {ca}")
            else:
                out.append(f"{k}: another {ca}")
    return out


def _text_change(a: str, b: str) -> str:
    wa, wb = len(a.split()), len(b.split())
    if wa == wb:
        return ""
    return f" ({wa} -> {wb} words)"


def template(args: dict[str, Any] | None, *, keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A call's argument shape: the value's class for the arguments in `keep`, else its type."""
    names = {str: "string", bool: "boolean", int: "number", float: "number", list: "list"}
    out: dict[str, Any] = {}
    for k, v in (args or {}).items():
        if k in keep:
            out[k] = f"<{value_class(v)}>"
        else:
            out[k] = f"<{names.get(type(v), 'object' if isinstance(v, dict) else 'value')}>"
    return out
