"""The few expressions SQLite and PostgreSQL spell differently, for set-based statements."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Float, Uuid, case, cast, extract, func, literal, over
from sqlalchemy.sql.elements import ColumnElement

from memory_core.models.columns import UTCDateTime


def ts(value: datetime) -> ColumnElement[datetime]:
    """A timestamp bound with the column type, so SQLite compares it as stored text."""
    return literal(value, UTCDateTime())


def run_uuids(dialect: str, run_id: uuid.UUID, order_by: Any) -> ColumnElement[Any]:
    """Ids for the rows one statement inserts: the run's random 60 bits, then the row number
    (a version-8 UUID). Sequential ids append to the primary key's B-tree instead of landing
    all over it, which made history inserts over a million cards a third faster."""
    h = run_id.hex
    prefix = f"{h[:12]}8{h[13:16]}8"  # version 8, variant 10xx; 15 hex digits left
    n = over(func.row_number(), order_by=order_by)
    if dialect == "postgresql":
        return cast(literal(prefix) + func.lpad(func.to_hex(n), 15, "0"), Uuid())
    return literal(prefix) + func.printf("%015x", n)


def json_object(dialect: str, **fields: Any) -> ColumnElement[Any]:
    """A JSON object built by the database from column expressions."""
    fn = func.jsonb_build_object if dialect == "postgresql" else func.json_object
    args: list[Any] = []
    for key, value in fields.items():
        args += [literal(key), value]
    return fn(*args)


def days_since(dialect: str, now: datetime, then: ColumnElement[Any]) -> ColumnElement[Any]:
    """Days from `then` to `now` as a float (negative when `then` lies in the future)."""
    if dialect == "postgresql":
        return cast(extract("epoch", ts(now) - then), Float) / 86400.0
    return func.julianday(ts(now)) - func.julianday(then)


def halvings(days: ColumnElement[Any], half_life: float) -> ColumnElement[Any]:
    """0.5 ** (days / half_life), 1 for a non-positive age (as cards.score.recency clamps it).
    power() is the same word on both (SQLite: a math function, registered if missing)."""
    return case((days <= 0, literal(1.0)), else_=func.power(0.5, days / half_life))
