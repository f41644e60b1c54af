"""Trajectories: what an agent did, normalised into steps, waiting for retrospection."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from memory_core.models.columns import json_column, new_id, utc_column, utcnow


class Outcome(StrEnum):
    """How the run ended."""

    success = "success"
    failure = "failure"
    unknown = "unknown"


class TrajectoryStatus(StrEnum):
    """Where a trajectory is in the pipeline."""

    pending = "pending"
    processing = "processing"
    done = "done"
    dead_letter = "dead_letter"
    discarded = "discarded"  # a dead letter an operator gave up on, with the reason in `extra`


class Step(BaseModel):
    """One normalised step: a message, or a tool call with its observation or error."""

    index: int
    type: Literal["message", "tool_call"]
    role: str | None = None
    text: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    observation: str | None = None
    error: str | None = None
    ts: datetime | None = None
    # conversations: who said it and the turn's own id, so facts can point back to the turn
    speaker: str | None = None
    turn_id: str | None = None


class Refusal(BaseModel):
    """A record that was not stored: its name (file:line, or its place in a request) and why."""

    record: str
    error: str


class TrajectoryCreate(BaseModel):
    """A parsed, validated trajectory ready to be stored."""

    key: str
    content_hash: str
    source_format: Literal["openai_chat", "steps", "conversation"]
    namespace: str
    task_type: str
    agent_id: str | None = None
    outcome: Outcome = Outcome.unknown
    reward: float | None = None
    steps: list[Step]
    extra: dict[str, Any] = {}


class Trajectory(SQLModel, table=True):
    """A stored trajectory; `key` (external id or content hash) makes ingest idempotent."""

    __tablename__ = "trajectory"
    __table_args__ = (
        UniqueConstraint("namespace", "key", name="uq_trajectory_namespace_key"),
        Index("ix_trajectory_claim", "status", "lease_until"),
        Index("ix_trajectory_task_group", "namespace", "task_group"),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    namespace: str = Field(max_length=128, index=True)
    key: str = Field(max_length=256)
    content_hash: str = Field(max_length=64)
    source_format: str = Field(max_length=16)
    task_type: str = Field(max_length=128)
    agent_id: str | None = Field(default=None, max_length=128)
    outcome: str = Field(default=Outcome.unknown.value, max_length=16)
    reward: float | None = None
    steps: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    # the trials of one task (retrospect.contrast.task_group): the contrast reads them together
    task_group: str | None = Field(default=None, max_length=255)
    status: str = Field(default=TrajectoryStatus.pending.value, max_length=16)
    lease_owner: str | None = Field(default=None, max_length=64)
    lease_until: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    # refreshed by the holder while it works (memory_core.heartbeat): a silence frees the claim
    lease_heartbeat: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    attempts: int = 0
    error: str | None = None
    # when the rule drafts were written: an LLM failure then parks only the LLM part
    rules_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    dead_letter_run: str | None = Field(default=None, max_length=64)  # the flow run that parked it
    cards_written: int = 0
    # the migration that added them gave the rows then stored a 0: a new store's schema
    # (memory_core.schema_new) has the same default
    tokens_sent: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    tokens_saved: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    created_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    processed_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
