"""The change feed of cards: one row per insert, update or delete, written by triggers."""

from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, Column, Index, Integer
from sqlmodel import Field, SQLModel

# SQLite numbers rows with its rowid only for INTEGER PRIMARY KEY
SEQ_TYPE = BigInteger().with_variant(Integer(), "sqlite")


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
