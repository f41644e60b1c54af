"""A namespace's snapshot saved to a file, read back on a cold load (issue #21).

Not pickle (a tampered file must not run code): a magic line, a JSON header line, then one
orjson object of column arrays (a card per position) with the tables the columns index into:
precondition texts and lists, kinds, shared texts, and each card's filed need, so that a load
neither parses preconditions nor chooses needs again. The header names the format, the
database, the namespace, the feed watermark the cards are current at, and the body's length
and CRC: a truncated or altered file is refused before its body is parsed.
"""

from __future__ import annotations

import hashlib
import os
import uuid
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from memory_core.preconditions import CompiledPrecondition, scan_variables
from memory_core.serve.atoms import AtomKey, Need
from memory_core.serve.card_rows import shared_compiled
from memory_core.serve.entry import Entry

FORMAT = 1
MAGIC = b"HINDSIGHT-SNAPSHOT\n"
TMP_SUFFIX = ".tmp"
MAX_HEADER = 64 * 1024


class Rejected(Exception):
    """The file cannot be used; `reason` says why (logged with the file's name)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def file_name(namespace: str) -> str:
    """A namespace's file name: a hash, since namespaces are user input."""
    return hashlib.sha256(namespace.encode()).hexdigest()[:40] + ".snap"


def _need_json(n: Need) -> list[Any]:
    if n[0] == "eq":
        return ["eq", [[var, key[0], key[1]] for var, key in n[1]]]
    return list(n)


def _need_of(j: list[Any], atoms: dict[tuple[str, AtomKey], tuple[str, AtomKey]]) -> Need:
    """A need from its JSON form: tuples again, as the index and the stats key them; atoms:
    one object per equality (a million cards' needs repeat ~1M of them: ~70 MB held once)."""
    kind = j[0]
    if kind == "eq":
        eq = [(str(v), (str(t), x)) for v, t, x in j[1]]
        return ("eq", tuple(atoms.setdefault(a, a) for a in eq))
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
) -> list[bytes]:
    """The body in parts of one JSON object: the cards' columns (in their snapshot's order),
    the index's statistics, and the cards kept per variable for explain (by position)."""
    texts: dict[str, int] = {}
    lists: dict[int, int] = {}
    list_rows: list[list[int]] = []
    shared: dict[str, int] = {}
    needs: dict[Need, int] = {}
    kinds: dict[str, int] = {}
    var_sets: dict[frozenset[str], int] = {}
    pre, rest, filed, kind = [], [], [], []
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
    position = {e.card_id: i for i, e in enumerate(entries)}
    body = {
        "id": "".join(e.card_id.hex for e in entries),
        "kind": kind,
        "confidence": [e.confidence for e in entries],
        # null: the last update (never used), one datetime fewer to parse
        "seen_at": [None if e.seen_at == e.updated_at else e.seen_at for e in entries],
        "use_count": [e.use_count for e in entries],
        "evidence_count": [e.evidence_count for e in entries],
        "pre": pre,
        "scenario": [e.scenario for e in entries],
        "rest": rest,
        "trust": [e.trust for e in entries],
        "pinned": [e.pinned for e in entries],
        "version": [e.version for e in entries],
        "updated_at": [e.updated_at for e in entries],
        "run_count": [e.run_count for e in entries],
        "filed": filed,
        "texts": list(texts),
        # each text's variables as scanned (-1: a shape the scan cannot read: compiled)
        "text_vars": [
            -1 if (v := scan_variables(t)) is None else var_sets.setdefault(v, len(var_sets))
            for t in texts
        ],
        "var_sets": [sorted(v) for v in var_sets],
        "lists": list_rows,
        "shared": list(shared),
        "kinds": list(kinds),
        "needs": [_need_json(n) for n in needs],
        "atoms": [[var, key[0], key[1], n] for (var, key), n in atoms.items()],
        "readers": {
            var: [position[c] for c in kept if c in position] for var, kept in readers.items()
        },
    }
    # a column at a time: one dump of the whole body held the GIL, and so every query,
    # ~0.5 s at a million cards (a column's: ~0.1 s)
    parts = [b"{"]
    for key, value in body.items():
        parts += [b"," if len(parts) > 1 else b"", orjson.dumps(key), b":", orjson.dumps(value)]
    return [*parts, b"}"]


@dataclass
class Saved:
    """A file's cards in order, each one's need (by position in needs; -1: reads no variable,
    -2: broken), the index's statistics, and the cards kept per variable for explain."""

    entries: list[Entry]
    filed: list[int]
    needs: list[Need]
    atoms: Counter[tuple[str, AtomKey]]
    readers: dict[str, list[int]]


_COLUMNS = (
    "kind",
    "confidence",
    "seen_at",
    "use_count",
    "evidence_count",
    "pre",
    "scenario",
    "rest",
    "trust",
    "pinned",
    "version",
    "updated_at",
    "run_count",
    "filed",
)


def parse(body: bytes | memoryview) -> Any:
    """The body's JSON (the caller drops the bytes before decoding: a fifth of the peak)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise Rejected(f"malformed body: {exc}") from exc


def decode(cols: Any) -> Saved:
    """The saved snapshot from the parsed body (Rejected when it is malformed)."""
    try:
        sets = [frozenset(str(v) for v in vs) for vs in cols["var_sets"]]
        compiled: list[CompiledPrecondition] = [
            shared_compiled(t, None if v < 0 else sets[v])
            for t, v in zip(cols["texts"], cols["text_vars"], strict=True)
        ]
        tuples = [tuple(compiled[i] for i in row) for row in cols["lists"]]
        shared, kinds = cols["shared"], [str(k) for k in cols["kinds"]]
        ids: str = cols["id"]
        # hex digits only (fromhex skips whitespace: the byte count catches it), 32 a card
        if len(bytes.fromhex(ids)) * 2 != len(ids) or len(ids) != 32 * len(cols["filed"]):
            raise Rejected("the card ids do not match the columns")
        when = datetime.fromisoformat
        # confidences and origins' weights: a few values, one float object each
        floats: dict[float, float] = {}
        column = {c: cols[c] for c in _COLUMNS}
        one = floats.setdefault
        for c in ("confidence", "trust"):  # as share_float, inline: a call per card is ~0.1 s
            column[c] = [one(x, x) if type(x) is float and x else x for x in cols[c]]
        one_atom: dict[tuple[str, AtomKey], tuple[str, AtomKey]] = {}
        entries: list[Entry] = []
        add = entries.append
        at = 0
        new, put, cls, unknown = (
            object.__new__,
            object.__setattr__,
            uuid.UUID,
            uuid.SafeUUID.unknown,
        )
        for k, conf, seen, uses, ev, p, sc, r, tr, pin, ver, upd, runs, f in zip(
            *(column[c] for c in _COLUMNS), strict=True
        ):
            updated = None if upd is None else when(upd)
            # uuid.UUID(hex) without its checks of other forms (half a load's id cost): the two
            # slots set as UUID.__setstate__ sets them; the ids were checked to be hex digits
            card_id = new(cls)
            put(card_id, "int", int(ids[at : at + 32], 16))
            put(card_id, "is_safe", unknown)
            # positional: Entry's fields in order (filed, indexed and words as the index sets)
            add(
                Entry(
                    card_id, kinds[k], conf,
                    updated if seen is None and updated else when(seen), uses, ev, tuples[p], sc,
                    shared[r], f == -2, tr, pin is True, ver, updated, None, False, None, runs,
                )
            )  # fmt: skip
            at += 32
        saved = Saved(
            entries,
            cols["filed"],
            [_need_of(j, one_atom) for j in cols["needs"]],
            Counter({(str(v), (str(t), x)): int(n) for v, t, x, n in cols["atoms"]}),
            {str(var): [int(p) for p in ps] for var, ps in cols["readers"].items()},
        )
        if saved.filed and (max(saved.filed) >= len(saved.needs) or min(saved.filed) < -2):
            raise Rejected("a card filed under a need the file does not hold")
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise Rejected(f"malformed body: {type(exc).__name__}: {exc}") from exc
    return saved


def write(path: Path, header: dict[str, Any], body: Sequence[bytes]) -> None:
    """Write atomically: a temp file beside it, fsynced, renamed over it, the folder fsynced.
    A write killed midway leaves a temp file, never a part of the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    crc = 0
    for part in body:
        crc = zlib.crc32(part, crc)
    size = sum(len(part) for part in body)
    head = orjson.dumps({**header, "format": FORMAT, "body_bytes": size, "crc32": crc})
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + head + b"\n")
            f.writelines(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # gone after the rename; a failed write leaves nothing
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a crash
    finally:
        os.close(folder)


def read(path: Path) -> tuple[dict[str, Any], memoryview]:
    """The header and the body, checked for length and CRC (Rejected otherwise)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise Rejected(f"unreadable: {exc}") from exc
    if not data.startswith(MAGIC):
        raise Rejected("not a snapshot file")
    end = data.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER)
    if end < 0:
        raise Rejected("no header")
    try:
        header = orjson.loads(data[len(MAGIC) : end])
    except orjson.JSONDecodeError as exc:
        raise Rejected(f"malformed header: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        found = header.get("format") if isinstance(header, dict) else None
        raise Rejected(f"format {found!r}, this version reads {FORMAT}")
    body = memoryview(data)[end + 1 :]  # not a copy: the body is the file's bulk
    if len(body) != header.get("body_bytes"):
        raise Rejected(f"truncated: {len(body)} of {header.get('body_bytes')} body bytes")
    if zlib.crc32(body) != header.get("crc32"):
        raise Rejected("the body's CRC does not match")
    return header, body
