"""A snapshot's cards read from their rows: values by position, JSON parsed with orjson,
precondition lists and texts shared within a load and across snapshots.

Layer: cards.
"""

from __future__ import annotations

import json
import logging
import sys
from operator import itemgetter
from typing import Any
from weakref import WeakValueDictionary

import orjson
from sqlalchemy import JSON, Text, cast

from memory_core.cards.profile import stored_profile
from memory_core.cel_programs import on_use_scanned
from memory_core.preconditions import CompiledPrecondition, compile_stored
from memory_core.screen.provenance import trust
from memory_core.serve.changes import COLUMNS
from memory_core.serve.entry import Entry

log = logging.getLogger(__name__)


def _rest(action_sequence: Any, failure_modes: Any, value: Any) -> str:
    steps = " ".join(f"{a.get('tool', '')} {a.get('note', '')}" for a in action_sequence)
    modes = " ".join(f"{m.get('mode', '')} {m.get('handling', '')}" for m in failure_modes)
    return f"{steps} {modes} {value or ''}"


# compiled preconditions by normalised text, shared by every card (and snapshot) holding the
# text while one does: a compiled program costs about 900 bytes, and a million cards hold a
# few hundred thousand distinct texts (an lru cache of 65k recompiled the rest per card)
_SHARED: WeakValueDictionary[str, CompiledPrecondition] = WeakValueDictionary()


def shared_compiled(source: str, variables: frozenset[str] | None = None) -> CompiledPrecondition:
    """The compiled precondition of a stored text, one object per text (never mutated);
    variables: what scan_variables found in it before (not scanned again)."""
    c = _SHARED.get(source)
    if c is None:
        made = (
            compile_stored(source, on_use=True)
            if variables is None
            else on_use_scanned(source, variables)
        )
        c = _SHARED.setdefault(source, made)
    return c


def share_float(seen: dict[float, float], value: Any) -> Any:
    """The one float object of a load equal to value (a float is 24 bytes and cards repeat a
    few confidences: ~30 MB at a million cards); zero (equal to -0.0) and non-floats as given."""
    return seen.setdefault(value, value) if type(value) is float and value else value


class LoadMemo:
    """What the cards of one load share: precondition tuples by stored list, origins' weights
    by stored provenance, equal confidences."""

    def __init__(self) -> None:
        self.lists: dict[tuple[CompiledPrecondition, ...], tuple[CompiledPrecondition, ...]] = {}
        self.trusts: dict[Any, tuple[float, Profile]] = {}
        self.texts: dict[str, str] = {}  # steps and failure modes, often repeated
        self.compiled: dict[str, CompiledPrecondition] = {}
        self.floats: dict[float, float] = {}

    def text(self, value: str) -> str:
        """The load's one string equal to value."""
        return self.texts.setdefault(value, value)


def _compiled(stored: Any, memo: LoadMemo | None) -> tuple[CompiledPrecondition, ...]:
    """A card's precondition list (as stored: JSON text or parsed), one tuple per distinct
    list within a load; the texts compile on first use (an uncompilable one never holds)."""
    if memo is None:
        return tuple(shared_compiled(p) for p in _json(stored))
    # a plain dict first: the shared one's lookups cost ~1.5 us each
    get, put = memo.compiled.get, memo.compiled.setdefault
    out = tuple([get(p) or put(p, shared_compiled(p)) for p in _json(stored)])
    # keyed by the tuple itself, which the cards keep: keyed by the stored text, ~500k texts
    # freed after a million cards' load left ~55 MB of holes among the cards' strings
    return memo.lists.setdefault(out, out)


# a tool's reminder's profile compiled (memory_core.cards.profile), () for every other card
Profile = tuple[CompiledPrecondition, ...]


def _origin(provenance: Any) -> tuple[float, Profile]:
    """The origin's weight and the compiled profile of a parsed provenance."""
    prov = provenance if isinstance(provenance, dict) else {}
    # a regular expression last: it costs ~70 us where an equality costs 0.3 (serve/profiles)
    exprs = sorted((p["expr"] for p in stored_profile(prov)), key=lambda e: ".matches(" in e)
    return trust(prov), tuple(shared_compiled(e) for e in exprs)


def _trust(stored: Any, memo: LoadMemo | None) -> tuple[float, Profile]:
    """The weight of the card's origin and its profile, read from its stored provenance."""
    if memo is None or not isinstance(stored, (str, bytes)):
        return _origin(_json(stored) or {})
    if (found := memo.trusts.get(stored)) is None:
        found = memo.trusts[stored] = _origin(_json(stored) or {})
    return found


def _json(value: Any) -> Any:
    """A JSON column read as text or already parsed (the PostgreSQL driver, unless cast)."""
    if not isinstance(value, (str, bytes)):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        # what orjson refuses and the json module reads: a number past a double's range
        # (PostgreSQL's jsonb keeps 1e400), NaN or Infinity written outside Hindsight
        return json.loads(value)


# a row's values by position: a Row's attribute access by name costs ~0.6 us, 16 of them
# per card were a fifth of a load; unpacking it is one C call
_FIELDS = itemgetter(
    *(
        [c.key for c in COLUMNS].index(name)
        for name in (
            "card_id",
            "kind",
            "confidence",
            "last_used_at",
            "updated_at",
            "use_count",
            "evidence_count",
            "run_count",
            "preconditions",
            "scenario",
            "action_sequence",
            "failure_modes",
            "value",
            "provenance",
            "pinned",
            "version",
        )
    )
)


def entry_of(
    r: Any, memo: LoadMemo | None = None, profiles: dict[Any, Profile] | None = None
) -> Entry:
    """A card row as retrieval needs it (changes.COLUMNS; JSON columns parsed or as text);
    memo shares precondition lists and origins between the cards of one load. A card with a
    profile has it put in `profiles` (a side table: few cards hold one, and a slot in Entry
    would cost every card 16 bytes)."""
    (card_id, kind, confidence, last_used, updated, uses, evidence, runs, pre, scenario, steps,
     modes, value, provenance, pinned, version) = _FIELDS(tuple(r))  # fmt: skip
    try:
        rest = _rest(_json(steps), _json(modes), value)
        compiled, broken = _compiled(pre, memo), False
        weight, profile = _trust(provenance, memo)
        if profile and profiles is not None:
            profiles[card_id] = profile
    except (ValueError, TypeError, AttributeError) as exc:
        # a row Hindsight did not write (a hand edit, another tool): JSON that does not parse
        # or lists of the wrong shape. Held as broken, never served; its namespace still loads
        # and a feed batch holding it is applied whole
        log.warning("card %s is not served: its stored JSON cannot be read (%s)", card_id, exc)
        rest, compiled, weight, broken = "", (), 0.0, True
    return Entry(
        card_id,
        sys.intern(kind),
        confidence if memo is None else share_float(memo.floats, confidence),
        last_used or updated,
        uses,
        evidence,
        compiled,
        scenario,
        rest if memo is None else memo.text(rest),
        broken,
        weight,
        bool(pinned),
        version,
        updated,
        run_count=runs,
    )


def row_columns() -> tuple[Any, ...]:
    """changes.COLUMNS with the JSON columns cast to text: parsed by orjson, faster than the
    driver's json module at a million rows (psycopg parses a jsonb value itself, so the
    cast is in the SQL; a type_coerce left it parsing: a fifth of a PostgreSQL load)."""
    return tuple(cast(c, Text).label(c.key) if isinstance(c.type, JSON) else c for c in COLUMNS)
