"""The state of the object a write names, as generic atoms, for bench/lessons_write_state.py.

For each identifier value among a call's arguments (an id's shape or a code by `value_class`:
never a word, a date or free text), the most recent earlier effective tool result whose JSON
holds that value, flattened into atoms (nothing here names a tool or a field of any data set):
* `path=class`: each leaf by its path (list positions dropped, id-like keys by their shape) and
  its value class from memory_core/retrospect/call_features.py (a word stays, an id keeps its
  shape, a number its sign, a list its length; a capitalised word is a name);
* `path < path`: the order of every two dates of the object (the runs carry no clock, so no
  date is compared with now);
* `args.k == k` / `!=`: an argument of the call against the object's field of the same name.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from itertools import combinations
from typing import Any

from memory_core.retrospect.call_features import _DATE, _DATETIME, _norm, value_class

_TITLE = re.compile(r"^[A-Z][a-z]+(?:[ \-'][A-Z][a-z]+)*$")


def identifiers(args: dict[str, Any]) -> set[str]:
    """The arguments' identifier values: strings whose class is an id's shape or a code."""
    leaves: list[tuple[str, Any]] = []
    _flatten(args, "", leaves)
    return {v for _, v in leaves if isinstance(v, str) and not _DATE.match(_norm(v)) and _is_id(v)}


def _is_id(value: str) -> bool:
    cls = value_class(value)
    return cls.endswith("<digits>") or cls.endswith("-character code")


def _key(k: str) -> str:
    """An object key by its shape when it is an id (a map keyed by ids), else as it is."""
    return k if not _is_id(k) else value_class(k)


def _flatten(value: Any, path: str, out: list[tuple[str, Any]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{path}.{_key(str(k))}" if path else _key(str(k)), out)
    elif isinstance(value, list):
        out.append((path or "(result)", value))
        for v in value:
            _flatten(v, f"{path}[]", out)
    else:
        out.append((path, value))


def _holds(value: Any, needle: str) -> bool:
    if isinstance(value, dict):
        return needle in value or any(_holds(v, needle) for v in value.values())
    if isinstance(value, list):
        return any(_holds(v, needle) for v in value)
    return isinstance(value, str) and value == needle


def _day(value: Any) -> str | None:
    text = _norm(str(value)) if isinstance(value, str) else ""
    return text[:10] if _DATE.match(text) or _DATETIME.match(text) else None


def state_class(value: Any) -> str:
    """`value_class`, except that a capitalised word is a name (a person's, not a choice)."""
    if isinstance(value, str) and _TITLE.match(value.strip()):
        return "a name"
    return value_class(value)


def state_atoms(obj: Any, args: dict[str, Any], ids: bool = True) -> set[str]:
    """The object's state as atoms: leaf classes, date order, and arguments against fields
    (`ids`: with the shapes of identifiers, which may carry one person's name in a prefix)."""
    leaves: list[tuple[str, Any]] = []
    _flatten(obj, "", leaves)
    out = {
        f"{p}={state_class(v)}" for p, v in leaves if ids or not (isinstance(v, str) and _is_id(v))
    }
    days: dict[str, list[str]] = defaultdict(list)
    for p, v in leaves:
        if (d := _day(v)) is not None:
            days[p].append(d)
    for a, b in combinations(sorted(days), 2):
        rel = {(x > y) - (x < y) for x in days[a] for y in days[b]}
        if len(rel) == 1:
            out.add(f"{a} {'<=>'[rel.pop() + 1]} {b}")
    by_name: dict[str, list[Any]] = defaultdict(list)
    for p, v in leaves:
        by_name[p.rsplit(".", 1)[-1].removesuffix("[]")].append(v)
    for k, v in args.items():
        if isinstance(v, str | int | float | bool) and by_name.get(k):
            out.add(f"args.{k} {'==' if v in by_name[k] else '!='} {k}")
    return out


def write_state(call: Any, earlier: list[Any], ids: bool = True) -> set[str]:
    """Atoms of the most recent earlier effective result holding each identifier argument."""
    out: set[str] = set()
    for ident in identifiers(call.args or {}):
        for s in reversed(earlier):
            if s.error or ident not in (s.observation or ""):
                continue
            try:
                obj = json.loads(s.observation)
            except ValueError:
                continue  # a result cut short or not JSON: no state to read
            if _holds(obj, ident):
                out |= state_atoms(obj, call.args or {}, ids)
                break
    return out


def features(atoms: set[str], pairs: bool = True) -> set[str]:
    """Every atom and (`pairs`) every pair of atoms."""
    if not pairs:
        return atoms
    return atoms | {f"{a} & {b}" for a, b in combinations(sorted(atoms), 2)}
