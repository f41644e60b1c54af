"""A namespace as JSON Lines: the header naming the format and schema, and each record's row
written from and read back into its table's columns, type by type."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import JSON, Boolean, Float, Integer, String, Table, TypeDecorator, Uuid
from sqlmodel import SQLModel

from memory_core.errors import InvalidInput
from memory_core.models.card import Card, CardEvidence, CardVersion
from memory_core.models.columns import UTCDateTime
from memory_core.models.trajectory import Trajectory, TrajectoryStatus

FORMAT = "hindsight-namespace"
# the layout of the lines; a reader takes files of this version or older (UPGRADES)
VERSION = 1
# format version -> a function bringing one record of that version to the next version
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

# record type -> its model, in the order a file lists them (parents before children)
MODELS: dict[str, type[SQLModel]] = {
    "trajectory": Trajectory,
    "card": Card,
    "card_version": CardVersion,
    "card_evidence": CardEvidence,
}
# each record type's columns that hold an id of this file (remapped on import elsewhere)
IDS: dict[str, tuple[str, ...]] = {
    "trajectory": ("id",),
    "card": ("card_id", "supersedes", "superseded_by"),
    "card_version": ("id", "card_id"),
    "card_evidence": ("id", "card_id", "trajectory_id"),
}
# a run's summary: what a card's evidence needs of it once its raw steps are gone
SUMMARY_CLEARED: dict[str, Any] = {
    "steps": [],
    "error": None,
    "lease_owner": None,
    "lease_until": None,
}


def dumps(record: dict[str, Any]) -> bytes:
    """One line: keys sorted (PostgreSQL's JSONB reorders them), so a dump is canonical."""
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z) + b"\n"


def table_of(kind: str) -> Table:
    """The table a record type is stored in."""
    return MODELS[kind].__table__  # type: ignore[attr-defined,no-any-return]


def summary_of(row: dict[str, Any]) -> dict[str, Any]:
    """A run reduced to what evidence cites: its id, key, task, outcome and times, no steps."""
    extra = {"summary": True}
    return {**row, **SUMMARY_CLEARED, "extra": extra, "status": TrajectoryStatus.done.value}


@dataclass(frozen=True)
class _Column:
    name: str
    convert: Callable[[Any], Any]
    nullable: bool
    default: Callable[[], Any] | None  # None: the column must be given


def _typed(kind: type, what: str) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise ValueError(f"expected {what}, got {type(v).__name__}")
        return v

    return convert


def _as_is(v: Any) -> Any:
    return v


def _uuid(v: Any) -> uuid.UUID:
    return uuid.UUID(str(v))


def _utc(v: Any) -> datetime:
    if not isinstance(v, str):
        raise ValueError("expected an ISO 8601 time as text")
    out = datetime.fromisoformat(v)
    if out.tzinfo is None:
        raise ValueError("a time without its UTC offset")
    return out


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"expected a number, got {type(v).__name__}")
    return float(v)


def _converter(col: Any) -> Callable[[Any], Any]:
    t = col.type
    if isinstance(t, UTCDateTime):
        return _utc
    if isinstance(t, TypeDecorator):  # sqlmodel's AutoString: text underneath
        t = t.impl_instance
    if isinstance(t, Uuid):
        return _uuid
    if isinstance(t, Boolean):
        return _typed(bool, "true or false")
    if isinstance(t, Integer):
        return _typed(int, "an integer")
    if isinstance(t, Float):
        return _number
    if isinstance(t, String):
        limit = t.length

        def text(v: Any) -> str:
            if not isinstance(v, str):
                raise ValueError(f"expected text, got {type(v).__name__}")
            if limit is not None and len(v) > limit:
                raise ValueError(f"longer than {limit} characters")
            return v

        return text
    if isinstance(t, JSON):
        return _as_is
    raise TypeError(f"no reader for column {col.name} of type {t!r}")


def _columns(kind: str) -> list[_Column]:
    model = MODELS[kind]
    out = []
    for col in table_of(kind).columns:
        info = model.model_fields.get(col.name)
        default: Callable[[], Any] | None = None
        if info is not None and not info.is_required():
            default = lambda info=info: info.get_default(call_default_factory=True)  # noqa: E731
        elif col.nullable:
            default = lambda: None  # noqa: E731
        out.append(_Column(col.name, _converter(col), bool(col.nullable), default))
    return out


COLUMNS: dict[str, list[_Column]] = {kind: _columns(kind) for kind in MODELS}
NAMES: dict[str, frozenset[str]] = {k: frozenset(c.name for c in cs) for k, cs in COLUMNS.items()}
# table name -> its JSON columns
JSON_COLUMNS: dict[str, frozenset[str]] = {
    table_of(k).name: frozenset(c.name for c in table_of(k).c if isinstance(c.type, JSON))
    for k in MODELS
}


def encode(kind: str, row: Any) -> dict[str, Any]:
    """A database row, its JSON columns read as text, as a record (ids as text, times as ISO
    8601 in UTC)."""
    out = dict(row._mapping)
    for name in JSON_COLUMNS[table_of(kind).name]:
        if out[name] is not None:
            out[name] = orjson.loads(out[name])
    return {"type": kind, "row": out}


def decode(kind: str, row: Any, *, line: int, schema: str | None) -> dict[str, Any]:
    """A record's row as the table's values: every column typed, missing ones (a file of an
    older schema) given their default; a column this schema does not know is refused."""
    if not isinstance(row, dict):
        raise InvalidInput(f"line {line}: the {kind}'s row is not an object", field="row")
    known = COLUMNS[kind]
    if not row.keys() <= NAMES[kind]:
        unknown = row.keys() - NAMES[kind]
        raise InvalidInput(
            f"line {line}: {kind} has columns this schema does not know: "
            f"{', '.join(sorted(unknown))} (the file's schema is {schema}; upgrade Hindsight "
            "to import it)",
            field="row",
        )
    out: dict[str, Any] = {}
    for c in known:
        if c.name not in row:
            if c.default is None:
                raise InvalidInput(f"line {line}: {kind} lacks {c.name}", field=c.name)
            out[c.name] = c.default()
            continue
        v = row[c.name]
        if v is None:
            if not c.nullable:
                raise InvalidInput(f"line {line}: {kind}.{c.name} is null", field=c.name)
            out[c.name] = None
            continue
        if c.convert is _as_is:
            out[c.name] = v
            continue
        try:
            out[c.name] = c.convert(v)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(f"line {line}: {kind}.{c.name}: {exc}", field=c.name) from exc
    return out
