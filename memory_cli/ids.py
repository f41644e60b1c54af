"""Ids on the command line: a full UUID or any unique prefix of one (tables show 8 characters)."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from memory_core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

_HEX = re.compile(r"^[0-9a-f]+$")
MIN_PREFIX = 4
_SHOWN = 5  # the ids an ambiguous prefix names


def resolve_id(value: str, *, engine: Engine, column: Any, field: str, what: str) -> uuid.UUID:
    """The one id in `column` that is `value` or starts with it; a clear error otherwise."""
    try:
        return uuid.UUID(value)
    except ValueError:
        pass
    prefix = value.strip().lower().replace("-", "")
    if len(prefix) < MIN_PREFIX or not _HEX.match(prefix):
        raise InvalidInput(
            f"{value!r} is not a {what} id: give the id or at least its first {MIN_PREFIX} "
            "hex characters, as the tables show them",
            field=field,
        )
    from sqlalchemy import String, cast, func, select
    from sqlmodel import Session

    # PostgreSQL prints a uuid with dashes, SQLite stores 32 hex digits: compare without dashes
    as_hex = func.replace(func.lower(cast(column, String)), "-", "")
    with Session(engine) as session:
        found = list(
            session.execute(
                select(column).where(as_hex.like(f"{prefix}%")).order_by(column).limit(_SHOWN + 1)
            ).scalars()
        )
    if not found:
        raise NotFound(f"no {what} id starts with {value!r}")
    if len(found) > 1:
        shown = ", ".join(str(f) for f in found[:_SHOWN]) + (", ..." if len(found) > _SHOWN else "")
        raise InvalidInput(
            f"{value!r} is ambiguous: {what} ids {shown} start with it; give more characters",
            field=field,
        )
    return found[0] if isinstance(found[0], uuid.UUID) else uuid.UUID(str(found[0]))


def card_id(value: str, *, engine: Engine, field: str = "card_id") -> uuid.UUID:
    """A card (or fact) id from a full id or a unique prefix."""
    from memory_core.models.card import Card

    return resolve_id(value, engine=engine, column=Card.card_id, field=field, what="card")
