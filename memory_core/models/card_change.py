"""The change feed of cards: one row per insert, update or delete, written by triggers; and a
row of no card when API keys were revoked or deleted (servers then check their cached keys)."""

from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, Column, Index, Integer
from sqlmodel import Field, SQLModel

# SQLite numbers rows with its rowid only for INTEGER PRIMARY KEY
SEQ_TYPE = BigInteger().with_variant(Integer(), "sqlite")
# the card id of a row that says "keys were revoked or deleted"; its namespace is empty (no
# namespace's name is left behind by its deletion), so no namespace's changes include it
KEYS_CHANGED = uuid.UUID(int=0)


class CardChange(SQLModel, table=True):
    """A card of a namespace changed; `seq` orders the changes (migration 0013's triggers
    write these rows in the transaction that changed the card, whoever changed it)."""

    __tablename__ = "card_change"
    __table_args__ = (
        Index("ix_card_change_namespace_seq", "namespace", "seq"),
        # never reuse a number, even after the feed was pruned empty
        {"sqlite_autoincrement": True},
    )

    seq: int | None = Field(
        default=None, sa_column=Column(SEQ_TYPE, primary_key=True, autoincrement=True)
    )
    namespace: str = Field(max_length=128)
    card_id: uuid.UUID


def keys_changed() -> dict[str, object]:
    """The values of the feed's row saying keys were revoked or deleted (insert it in the
    transaction that does so: servers read the feed and drop their cached keys)."""
    return {"namespace": "", "card_id": KEYS_CHANGED}
