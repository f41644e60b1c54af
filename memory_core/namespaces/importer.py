"""Import a namespace's JSON Lines: streamed in batches inside one transaction, so a bad line
(named by its number) leaves nothing written; idempotent by ids and keys, so importing the same
file twice changes nothing. Into another namespace name, every id is derived from the new name
and the old id (the same on every import), so the copy lives beside the original."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from memory_core.errors import InvalidInput
from memory_core.namespaces.lines import FORMAT, IDS, MODELS, UPGRADES, VERSION, decode, table_of

_BATCH = 2000
_NAMESPACED = ("trajectory", "card")  # record types with a namespace column


@dataclass
class Imported:
    """What an import read and what it added (rows already there are left as they are)."""

    namespace: str
    read: Counter[str] = field(default_factory=Counter)
    added: dict[str, int] = field(default_factory=dict)
    # the file's cards not stored: the namespace holds another live card with the signature
    same_signature: list[uuid.UUID] = field(default_factory=list)


def _header(first: bytes | None) -> dict[str, Any]:
    """The file's header, checked: the format and a version this reader takes."""
    try:
        head = orjson.loads(first) if first is not None else None
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"line 1: not JSON ({exc})", field="header") from exc
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise InvalidInput(
            f"line 1: not a namespace export (its first line must name the format {FORMAT!r})",
            field="header",
        )
    version = head.get("version")
    if not isinstance(version, int) or version < 1:
        raise InvalidInput(f"line 1: format version {version!r} is not valid", field="version")
    if version > VERSION:
        raise InvalidInput(
            f"line 1: the file is in format version {version} (schema {head.get('schema')}), "
            f"newer than this Hindsight reads (up to {VERSION}): upgrade Hindsight to import it",
            field="version",
        )
    missing = [v for v in range(version, VERSION) if v not in UPGRADES]
    if missing:
        raise InvalidInput(
            f"line 1: format version {version} cannot be migrated to {VERSION} "
            f"(no migration from version {missing[0]})",
            field="version",
        )
    if not isinstance(head.get("namespace"), str) or not head["namespace"].strip():
        raise InvalidInput("line 1: the header names no namespace", field="namespace")
    return head


def _remap(old: Any, target: str) -> Any:
    """An id of the copy in `target`: the same for the same old id on every import."""
    return None if old is None else uuid.uuid5(uuid.NAMESPACE_URL, f"hindsight:{target}:{old}")


def _counts(conn: Connection, namespace: str) -> dict[str, int]:
    cards = table_of("card")
    of_ns = select(cards.c.card_id).where(cards.c.namespace == namespace)
    out = {}
    for kind in MODELS:
        t = table_of(kind)
        where = t.c.namespace == namespace if kind in _NAMESPACED else t.c.card_id.in_(of_ns)
        out[kind] = int(conn.execute(select(func.count()).select_from(t).where(where)).scalar_one())
    return out


def import_namespace(
    *, engine: Engine, lines: Iterable[bytes], namespace: str | None = None
) -> Imported:
    """Store a namespace export (into `namespace`, or the one it was exported from)."""
    it = iter(lines)
    head = _header(next(it, None))
    source: str = head["namespace"]
    target = source if namespace is None else namespace
    if not target.strip() or len(target) > 128:
        raise InvalidInput("the namespace to import into is empty or too long", field="namespace")
    version: int = head["version"]
    out = Imported(target)
    insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
    statements = {k: insert(table_of(k)).on_conflict_do_nothing() for k in MODELS}
    batches: dict[str, list[dict[str, Any]]] = {k: [] for k in MODELS}
    card_ids: list[uuid.UUID] = []

    def flush(conn: Connection) -> None:
        for kind, rows in batches.items():  # parents first: the file lists them first
            if rows:
                conn.execute(statements[kind], rows)
                rows.clear()

    with engine.begin() as conn:
        before = _counts(conn, target)
        n = 1
        try:
            for n, raw in enumerate(it, start=2):
                if not raw.strip():
                    continue
                kind, row = _record(raw, n, version, head)
                if kind in _NAMESPACED:
                    if row["namespace"] != source:
                        raise InvalidInput(
                            f"line {n}: a {kind} of namespace {row['namespace']!r} in an "
                            f"export of {source!r}",
                            field="namespace",
                        )
                    row["namespace"] = target
                if target != source:
                    for name in IDS[kind]:
                        row[name] = _remap(row[name], target)
                batches[kind].append(row)
                if kind == "card":
                    card_ids.append(row["card_id"])
                out.read[kind] += 1
                if len(batches[kind]) >= _BATCH:
                    flush(conn)
            flush(conn)
        except IntegrityError as exc:
            raise InvalidInput(
                f"near line {n}: the file's rows conflict with what the store holds "
                f"({exc.orig}); nothing was imported",
                field="file",
            ) from exc
        after = _counts(conn, target)
        # a card the insert skipped is already there (its id) or beside another live card with
        # its signature (nothing of it stored): looked up only when some card was not added,
        # as RETURNING would make every insert a batched statement, several times slower
        if after["card"] - before["card"] < len(card_ids):
            out.same_signature = _absent(conn, card_ids)
    out.added = {k: after[k] - before[k] for k in MODELS}
    return out


def _absent(conn: Connection, card_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """The ids of these that no card of the store has, in their order."""
    t = table_of("card")
    present: set[uuid.UUID] = set()
    for at in range(0, len(card_ids), _BATCH):
        chunk = card_ids[at : at + _BATCH]
        present.update(conn.execute(select(t.c.card_id).where(t.c.card_id.in_(chunk))).scalars())
    return [c for c in card_ids if c not in present]


def _record(raw: bytes, n: int, version: int, head: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Line n as (record type, typed row), brought up to this format version."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"line {n}: not JSON ({exc})", field="line") from exc
    if not isinstance(record, dict):
        raise InvalidInput(f"line {n}: not a JSON object", field="line")
    for v in range(version, VERSION):
        record = UPGRADES[v](record)
    kind = record.get("type")
    if kind not in MODELS:
        raise InvalidInput(f"line {n}: unknown record type {kind!r}", field="type")
    return kind, decode(kind, record.get("row"), line=n, schema=head.get("schema"))
