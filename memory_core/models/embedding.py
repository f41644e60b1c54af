"""Embeddings of cards, kept in the database so an index rebuild never embeds twice."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlmodel import Field, SQLModel

from memory_core.models.columns import utc_column, utcnow


class CardEmbedding(SQLModel, table=True):
    """The vector of one card's text under one model (float32 bytes)."""

    __tablename__ = "card_embedding"

    card_id: uuid.UUID = Field(foreign_key="card.card_id", primary_key=True)
    model: str = Field(max_length=128, primary_key=True)
    # the embedded text's hash: a card whose text changed is embedded again
    text_hash: str = Field(max_length=64)
    dim: int
    vector: bytes
    created_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
