"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import random
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

JSONType = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def new_id() -> uuid.UUID:
    """A fresh random UUID."""
    return uuid.uuid4()


# a generator of our own: the global one is reseeded by whoever calls random.seed (Hypothesis
# does, per example: the ids repeated); reseeded from os.urandom in a forked child, or parent
# and child would draw the same ids
_IDS = random.Random()
os.register_at_fork(after_in_child=_IDS.seed)


def row_id() -> uuid.UUID:
    """A fresh time-ordered (version 7) UUID for a high-volume row (a use, a query): the
    milliseconds since the epoch, then 74 random bits. In time order the rows of a flush land
    on the last pages of their key's index instead of a random page each, so a commit writes
    a few pages (a random key dirtied a page a row). Drawn without a system call: uuid4 reads
    os.urandom, a point where a loaded machine takes the core away (240 us a call under
    profile at load 8). Unique, not secret: the generator is seeded from os.urandom, again in
    every forked process. Built as the uuid module builds one, without its checks of
    arguments we know are valid."""
    value = (time.time_ns() // 1_000_000) << 80 | _IDS.getrandbits(80)
    return uuid_of_int((value & _NOT_VERSION) | _VERSION_7)


def random_row_id() -> uuid.UUID:
    """A fresh random (version 4) UUID for a high-volume row a person reads by its first
    characters (a query, shown by 8 and found by any unique prefix): a time-ordered id's first
    8 characters are the same for every row of the same minute. Drawn as row_id is."""
    return uuid_of_int((_IDS.getrandbits(128) & _NOT_VERSION) | _VERSION_4)


def uuid_of_int(value: int) -> uuid.UUID:
    """uuid.UUID(int=value) without its argument checks (value: known to fit 128 bits)."""
    made = _NEW(_UUID)
    _SET(made, "int", value)
    _SET(made, "is_safe", _UNKNOWN)
    return made


# UUID(int=..., version=N): the variant bits set to RFC 4122's, the version bits to N
_VERSION_4 = (0x4000 << 64) | (0x8000 << 48)
_VERSION_7 = (0x7000 << 64) | (0x8000 << 48)
_NOT_VERSION = ~((0xF000 << 64) | (0xC000 << 48))
_NEW, _SET, _UUID, _UNKNOWN = object.__new__, object.__setattr__, uuid.UUID, uuid.SafeUUID.unknown


class UTCDateTime(TypeDecorator[datetime]):
    """Stores UTC; always hands back timezone-aware UTC datetimes (SQLite keeps no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; Hindsight stores UTC-aware timestamps only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def json_column(nullable: bool = False) -> Any:
    """A fresh JSON column (JSONB on PostgreSQL)."""
    return Column(JSONType, nullable=nullable)


def utc_column(nullable: bool = False, index: bool = False) -> Any:
    """A fresh UTC timestamp column."""
    return Column(UTCDateTime(), nullable=nullable, index=index)
