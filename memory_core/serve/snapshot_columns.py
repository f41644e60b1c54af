"""A snapshot's cards as the sections of its file (serve/snapshot_file.py): packed columns of
numbers, a card per position, and JSON tables they index into (precondition texts and lists,
kinds, shared texts, timestamps, each card's filed need), so that a load neither parses
preconditions nor chooses needs again, and parses each distinct timestamp once.

Layer: snapshot.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from struct import iter_unpack
from typing import Any

from memory_core.preconditions import CompiledPrecondition, scan_variables
from memory_core.serve.atoms import AtomKey, Need
from memory_core.serve.card_rows import Profile, shared_compiled
from memory_core.serve.entry import Entry
from memory_core.serve.snapshot_file import Body, Rejected, Section, json_section, numbers

# UUID's slots (it refuses setattr): set through their descriptors, not by name
set_int, set_safe = uuid.UUID.__dict__["int"].__set__, uuid.UUID.__dict__["is_safe"].__set__
# the packed columns: (name, array typecode)
INTS = ("use_count", "evidence_count", "version", "run_count")
INDEXES = ("kind", "pre", "rest", "filed", "seen_at", "updated_at")


def _need_json(n: Need, atoms: dict[tuple[str, AtomKey], int]) -> list[Any]:
    """A need's JSON form: an equality as its atoms' positions in the atom table."""
    if n[0] == "eq":
        return [atoms.setdefault(a, len(atoms)) for a in n[1]]
    return list(n)


def _need_of(j: list[Any], atoms: list[tuple[str, AtomKey]]) -> Need:
    """A need from its JSON form: tuples again, as the index and the stats key them, an
    equality's atoms the table's objects (a million cards' needs repeat ~1M of them)."""
    kind = j[0]
    if type(kind) is int:
        if min(j) < 0:
            raise Rejected("an atom position out of range")
        return ("eq", tuple(map(atoms.__getitem__, j)))
    if kind == "range":
        return ("range", str(j[1]), str(j[2]), float(j[3]))
    if kind == "window":
        return ("window", str(j[1]), float(j[2]), float(j[3]))
    if kind in ("substring", "has"):
        return tuple(str(x) for x in j)
    raise Rejected(f"unknown need {kind!r}")


def encode(
    entries: Sequence[Entry],
    atoms: Counter[tuple[str, AtomKey]],
    readers: dict[str, dict[uuid.UUID, Entry]],
    profiles: dict[uuid.UUID, Profile],
) -> list[Section]:
    """The cards' sections (in their snapshot's order), the index's statistics, the cards
    kept per variable for explain (by position) and the tool's reminders' profiles."""
    texts: dict[str, int] = {}
    lists: dict[int, int] = {}
    list_rows: list[list[int]] = []
    shared: dict[str, int] = {}
    needs: dict[Need, int] = {}
    kinds: dict[str, int] = {}
    times: dict[datetime | None, int] = {}
    var_sets: dict[frozenset[str], int] = {}
    column: dict[str, list[int]] = {c: [] for c in INDEXES}
    pre, rest, filed, kind = column["pre"], column["rest"], column["filed"], column["kind"]
    seen, updated = column["seen_at"], column["updated_at"]
    for e in entries:
        at = lists.get(id(e.compiled))
        if at is None:
            at = lists[id(e.compiled)] = len(list_rows)
            list_rows.append([texts.setdefault(c.source, len(texts)) for c in e.compiled])
        pre.append(at)
        rest.append(shared.setdefault(e.rest, len(shared)))
        kind.append(kinds.setdefault(e.kind, len(kinds)))
        # -1: read no variable (evaluated on every query), -2: broken (never served)
        f = -2 if e.broken or not e.indexed else -1
        if f == -1 and e.filed is not None:
            f = needs.setdefault(e.filed, len(needs))
        filed.append(f)
        u = -1 if e.updated_at is None else times.setdefault(e.updated_at, len(times))
        updated.append(u)
        # -1: the last update (never used)
        seen.append(-1 if e.seen_at == e.updated_at else times.setdefault(e.seen_at, len(times)))
    position = {e.card_id: i for i, e in enumerate(entries)}
    # [position, its profile's texts], the texts in the preconditions' table
    profile_rows = [
        [position[cid], [texts.setdefault(c.source, len(texts)) for c in p]]
        for cid, p in profiles.items()
        if cid in position
    ]
    # the statistics' atoms, then those only filed needs hold (counted 0: not in the stats)
    table = {a: i for i, a in enumerate(atoms)}
    need_rows = [_need_json(n, table) for n in needs]
    return [
        ("id", "B", b"".join(e.card_id.bytes for e in entries)),
        *(numbers(c, "i", column[c]) for c in INDEXES),
        *(numbers(c, "q", [getattr(e, c) for e in entries]) for c in INTS),
        numbers("confidence", "d", [e.confidence for e in entries]),
        numbers("trust", "d", [e.trust for e in entries]),
        numbers("pinned", "b", [e.pinned for e in entries]),
        json_section("scenario", [e.scenario for e in entries]),
        json_section("times", list(times)),
        json_section("texts", list(texts)),
        # each text's variables as scanned (-1: a shape the scan cannot read: compiled)
        json_section("text_vars", [_vars(t, var_sets) for t in texts]),
        json_section("var_sets", [sorted(v) for v in var_sets]),
        json_section("lists", list_rows),
        json_section("profiles", profile_rows),
        json_section("shared", list(shared)),
        json_section("kinds", list(kinds)),
        json_section("needs", need_rows),
        json_section(
            "atoms", [[var, key[0], key[1], atoms.get((var, key), 0)] for var, key in table]
        ),
        json_section(
            "readers",
            {var: [position[c] for c in kept if c in position] for var, kept in readers.items()},
        ),
    ]


def _vars(text: str, var_sets: dict[frozenset[str], int]) -> int:
    """A text's variables as scanned (-1: a shape the scan cannot read: compiled)."""
    v = scan_variables(text)
    return -1 if v is None else var_sets.setdefault(v, len(var_sets))


@dataclass
class Saved:
    """A file's cards in order, each one's need (by position in needs; -1: reads no variable,
    -2: broken), the index's statistics, and the cards kept per variable for explain."""

    entries: list[Entry]
    filed: Sequence[int]
    needs: list[Need]
    atoms: Counter[tuple[str, AtomKey]]
    readers: dict[str, list[int]]
    # by position, as the file holds them (a saved order's most support, serve/saved_orders.py)
    kind: Sequence[int]
    kinds: list[str]
    support: dict[str, Sequence[int]]
    profiles: dict[uuid.UUID, Profile]


def _within(body: Body, name: str, n: int, lo: int, hi: int) -> Any:
    """A column of n indexes, each in lo..hi-1 (a negative index would wrap, not fail)."""
    col = body.numbers(name, "i", n)
    if col and (min(col) < lo or max(col) >= hi):
        raise Rejected(f"section {name!r}: an index out of range")
    return col


def decode(body: Body, n: int) -> Saved:
    """The saved snapshot of n cards from the file's sections (Rejected when malformed)."""
    try:
        sets = [frozenset(str(v) for v in vs) for vs in body.json("var_sets")]
        texts, text_vars = body.json("texts"), body.json("text_vars")
        compiled: list[CompiledPrecondition] = [
            shared_compiled(str(t), None if v < 0 else sets[v])
            for t, v in zip(texts, text_vars, strict=True)
        ]
        del texts, text_vars
        rows = body.json("lists")
        if min(map(min, filter(None, rows)), default=0) < 0:  # would wrap, not fail
            raise Rejected("a precondition position out of range")
        tuples = [tuple(map(compiled.__getitem__, row)) for row in rows]
        del rows
        shared = [str(s) for s in body.json("shared")]
        kinds = [str(k) for k in body.json("kinds")]
        # each distinct timestamp parsed once, one object shared by its cards
        times = [datetime.fromisoformat(t) for t in body.json("times")]
        # the ids' ints at C speed, two 64-bit halves each
        ids = [hi << 64 | lo for hi, lo in iter_unpack(">QQ", body.numbers("id", "B", 16 * n))]
        counted = body.json("atoms")
        atoms = [(str(v), (str(t), x)) for v, t, x, _ in counted]
        needs = [_need_of(j, atoms) for j in body.json("needs")]
        kind = _within(body, "kind", n, 0, len(kinds))
        pre = _within(body, "pre", n, 0, len(tuples))
        rest = _within(body, "rest", n, 0, len(shared))
        filed = _within(body, "filed", n, -2, len(needs))
        seen = _within(body, "seen_at", n, -1, len(times))
        updated = _within(body, "updated_at", n, -1, len(times))
        uses, evidence, version, runs = (body.numbers(c, "q", n) for c in INTS)
        # confidences and origins' weights: a few values, one float object each
        floats: dict[float, float] = {}
        one = floats.setdefault
        confidence = [one(x, x) if x else x for x in body.numbers("confidence", "d", n)]
        trust = [one(x, x) if x else x for x in body.numbers("trust", "d", n)]
        pinned = body.numbers("pinned", "b", n)
        scenario = body.json("scenario")
        if not isinstance(scenario, list) or len(scenario) != n:
            raise Rejected("the scenarios do not match the cards")
        times.append(None)  # type: ignore[arg-type]  # updated_at -1: none
        entries: list[Entry] = []
        add = entries.append
        new, cls, unknown = object.__new__, uuid.UUID, uuid.SafeUUID.unknown
        for k, conf, s, us, ev, p, sc, r, f, tr, pin, ver, u, ru, i in zip(
            kind, confidence, seen, uses, evidence, pre, scenario, rest, filed, trust, pinned,
            version, updated, runs, ids, strict=True,
        ):  # fmt: skip
            upd = times[u]
            if s < 0 and upd is None:
                raise Rejected("a card seen at its last update, without one")
            # uuid.UUID(int=) without its checks (half a load's id cost): the two slots set
            # through their descriptors, as UUID.__setstate__ sets them
            card_id = new(cls)
            set_int(card_id, i)
            set_safe(card_id, unknown)
            # positional: Entry's fields in order (filed, indexed and words as the index sets)
            add(
                Entry(
                    card_id, kinds[k], conf, upd if s < 0 else times[s], us, ev, tuples[p],
                    str(sc), shared[r], f == -2, tr, pin == 1, ver, upd, None, False, None, ru,
                )
            )  # fmt: skip
        readers = body.json("readers")
        profiles = {
            entries[_position(at, n)].card_id: tuple(map(compiled.__getitem__, row))
            for at, row in body.json("profiles")
            if min(row, default=0) >= 0  # a negative text position would wrap
        }
        saved = Saved(
            entries,
            filed,
            needs,
            Counter({a: int(row[3]) for a, row in zip(atoms, counted, strict=True) if row[3]}),
            {str(var): [_position(p, n) for p in ps] for var, ps in readers.items()},
            kind,
            kinds,
            {"rows": evidence, "runs": runs},
            profiles,
        )
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise Rejected(f"malformed body: {type(exc).__name__}: {exc}") from exc
    return saved


def _position(p: Any, n: int) -> int:
    if type(p) is not int or not 0 <= p < n:
        raise Rejected(f"a card position out of range: {p!r}"[:100])
    return p
