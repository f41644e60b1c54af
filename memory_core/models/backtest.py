"""A card's backtest: its warnings replayed over the namespace's later runs, and the gate's
decision (served, or waiting in review) with the figures behind it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, utc_column, utcnow


class BacktestFigures(BaseModel):
    """What a card's page shows of its backtest and of the gate's decision."""

    groups: int  # task groups among the runs that support it
    operator: bool  # written or approved by an operator
    checked: int  # later runs replayed (stored after the card was learned)
    fired: int  # calls of those runs its pre-call preconditions matched
    right: int  # of those, calls where the failure it warns about happened (or at the retry)
    wrong: int  # warnings at calls where it did not (noise)
    low: float | None  # lower bound of the share right (Wilson), when any fired
    measured: bool  # enough warnings fired to judge it
    replayable: bool  # keyed on the call about to be made: a backtest applies
    serve: bool  # the gate's decision
    reason: str
    runs: list[dict[str, Any]] = []  # the latest warnings: run, call, tool, right, error
    computed_at: datetime


class CardBacktest(SQLModel, table=True):
    """The latest backtest of one card (one row per card, rewritten only when it changes)."""

    __tablename__ = "card_backtest"

    card_id: uuid.UUID = Field(primary_key=True)
    namespace: str = Field(max_length=128, index=True)
    groups: int = 0
    operator: bool = False
    checked: int = 0
    fired: int = 0
    right: int = 0
    wrong: int = 0
    low: float | None = None
    measured: bool = False
    replayable: bool = False
    serve: bool = True
    reason: str = ""
    runs: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    # the card's version when the gate sent it to review: it comes back by itself only if no
    # one else changed it since
    held_version: int | None = None
    computed_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())

    def figures(self) -> BacktestFigures:
        """The public view of this row."""
        return BacktestFigures.model_validate(self.model_dump())
