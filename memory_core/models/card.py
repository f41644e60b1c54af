"""Experience cards and facts, their evidence, version history and uses."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, field_validator
from sqlalchemy import Index, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from memory_core.effects.estimate import Effect
from memory_core.models.backtest import BacktestFigures
from memory_core.models.columns import json_column, new_id, utc_column, utcnow


class CardKind(StrEnum):
    """What a card holds."""

    experience = "experience"
    fact = "fact"


class CardStatus(StrEnum):
    """The lifecycle of a card."""

    draft = "draft"
    review = "review"
    active = "active"
    superseded = "superseded"
    archived = "archived"
    rejected = "rejected"
    quarantined = "quarantined"
    forgotten = "forgotten"  # a fact withdrawn on request


# at most one live card per (namespace, signature): the same lesson is one card
LIVE_STATUSES = ("draft", "review", "active", "quarantined")
# the live-signature index's WHERE: a query that repeats it as text may use that index
LIVE_SQL = "status IN ('draft', 'review', 'active', 'quarantined')"
_SUPERSEDED_SQL = "superseded_by IS NOT NULL"
CARD_FILLFACTOR = 80
# a card's first tool ('' when it has none) as each database indexes it (ix_card_first_tool,
# migration 0033): a query must spell it the same way for the planner to use the index
FIRST_TOOL_SQL = {
    "postgresql": "(coalesce(action_sequence #>> '{0,tool}', ''))",
    "sqlite": "coalesce(json_extract(action_sequence, '$[0].tool'), '')",
}


class ActionStep(BaseModel):
    """One step of a card's action sequence."""

    tool: str
    params_template: dict[str, Any] = {}
    note: str = ""


class FailureMode(BaseModel):
    """A known way the action fails and what to do about it."""

    mode: str
    handling: str = ""
    # where the mode's text came from (memory_core.screen.provenance.Origin); None on old rows
    origin: str | None = None


class EvidenceTriple(BaseModel):
    """Why we believe a card: the trajectory step and its condition -> action -> result."""

    trajectory_id: uuid.UUID
    step: int
    condition: dict[str, Any] = {}
    action: dict[str, Any] = {}
    result: dict[str, Any] = {}


class CardBase(SQLModel):
    """Fields a producer of a card chooses."""

    namespace: str = Field(default="default", max_length=128)
    kind: str = Field(default=CardKind.experience.value, max_length=16)
    scenario: str = Field(max_length=1000)
    preconditions: list[str] = Field(default_factory=list, sa_column=json_column())
    action_sequence: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    expected_outcome: str = ""
    actual_outcome: str = ""
    failure_modes: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    # facts (kind == "fact")
    key: str | None = Field(default=None, max_length=256)
    query: str | None = None
    value: str | None = None
    valid_until: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))


class CardCreate(CardBase):
    """A card to store; the server sets status, provenance, signature and evidence links."""

    @field_validator("confidence")
    @classmethod
    def _confidence_in_range(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError("confidence must be within 0..1")
        return v


class Card(CardBase, table=True):
    """A stored card (one row, one JSON object)."""

    __tablename__ = "card"
    __table_args__ = (
        Index(
            "uq_card_live_signature",
            "namespace",
            "signature",
            unique=True,
            sqlite_where=text(LIVE_SQL),
            postgresql_where=text(LIVE_SQL),
        ),
        Index("ix_card_namespace_status", "namespace", "status"),
        # the console lists and counts one kind (facts) per namespace
        Index("ix_card_namespace_kind_status", "namespace", "kind", "status"),
        # the console's list walks a kind's cards newest change first (the status read from
        # the entry); updated_at moves with versions, not with uses or outcomes
        Index("ix_card_namespace_kind_updated", "namespace", "kind", "updated_at", "status"),
        # the harms test reads the namespace's cards with enough withheld outcomes (few)
        Index("ix_card_namespace_withheld", "namespace", "withheld_outcomes"),
        # few cards are superseded: the others need no entry (and no index write per update)
        Index(
            "ix_card_superseded_by",
            "superseded_by",
            sqlite_where=text(_SUPERSEDED_SQL),
            postgresql_where=text(_SUPERSEDED_SQL),
        ),
        # uses, feedback and decay rewrite card rows often: free room on each page lets
        # PostgreSQL keep the new version there (a HOT update, no index writes)
        {"postgresql_with": {"fillfactor": CARD_FILLFACTOR}},
    )

    card_id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    status: str = Field(default=CardStatus.draft.value, max_length=16)
    signature: str = Field(max_length=64)
    provenance: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    evidence_count: int = 0  # evidence rows: a run that repeats a failure gives one per repeat
    # distinct runs among the evidence: what support and "more evidence first" orderings count,
    # so one looping (or hostile) run weighs as one run (migration 0015)
    run_count: int = Field(default=0, sa_column_kwargs={"server_default": text("0")})
    created_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    last_used_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    use_count: int = 0
    success_count: int = 0
    failure_count: int = 0
    consecutive_failures: int = 0
    version: int = 1
    supersedes: uuid.UUID | None = Field(default=None)
    # the card that replaced this one (merged into it, or superseded by a newer lesson)
    superseded_by: uuid.UUID | None = Field(default=None)
    # the last time decay tier applied (0: none); reset by a use, so each tier hits once
    decay_tier: int = Field(default=0, sa_column_kwargs={"server_default": text("0")})
    # restoring from the archive restarts the idle clock (see memory_core/decay)
    restored_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    # never withheld by the holdout (a safety warning an operator wants always served)
    pinned: bool = Field(default=False, sa_column_kwargs={"server_default": text("false")})
    # reported outcomes per holdout arm (memory_core.effects): kept on the card, so the
    # estimate survives the use log's retention
    served_outcomes: int = Field(default=0, sa_column_kwargs={"server_default": text("0")})
    served_successes: int = Field(default=0, sa_column_kwargs={"server_default": text("0")})
    withheld_outcomes: int = Field(default=0, sa_column_kwargs={"server_default": text("0")})
    withheld_successes: int = Field(default=0, sa_column_kwargs={"server_default": text("0")})
    # the last time decay faded the card for a measured lack of effect (once a night)
    effect_faded_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    # facts: whom the fact is about, who said it, and whether only their word stands behind it
    # (FactStanding; migration 0018); set by the writer, never by a caller's card
    subject: str | None = Field(default=None, max_length=256)
    speaker: str | None = Field(default=None, max_length=256)
    standing: str | None = Field(default=None, max_length=16)


class FactStanding(StrEnum):
    """What stands behind a fact."""

    claim = "claim"  # only a conversation asserts it: the speaker's word, not served by default
    corroborated = "corroborated"  # a tool result about its subject, or another speaker, agrees
    operator = "operator"  # written through a key or the CLI (a non-admin key's waits in review)


class CardPublic(CardBase):
    """A card as readers see it, with its evidence."""

    card_id: uuid.UUID
    status: str
    provenance: dict[str, Any]
    evidence_count: int
    run_count: int = 0
    evidence: list[EvidenceTriple] = []
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None
    use_count: int
    success_count: int
    failure_count: int
    consecutive_failures: int
    version: int
    supersedes: uuid.UUID | None
    superseded_by: uuid.UUID | None = None
    decay_tier: int = 0
    restored_at: datetime | None = None
    pinned: bool = False
    effect: Effect | None = None
    subject: str | None = None
    speaker: str | None = None
    standing: str | None = None
    backtest: BacktestFigures | None = None  # the serving gate's figures (memory_core.backtest)


class CardEvidence(SQLModel, table=True):
    """One piece of evidence for a card; unique per (card, trajectory, step) so re-runs add none."""

    __tablename__ = "card_evidence"
    __table_args__ = (
        UniqueConstraint("card_id", "trajectory_id", "step", name="uq_card_evidence"),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    card_id: uuid.UUID = Field(foreign_key="card.card_id", index=True)
    trajectory_id: uuid.UUID = Field(foreign_key="trajectory.id", index=True)
    step: int
    condition: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    action: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    result: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    created_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())


class CardVersion(SQLModel, table=True):
    """A snapshot of a card at one version, with who changed it and why."""

    __tablename__ = "card_version"
    __table_args__ = (
        UniqueConstraint("card_id", "version", name="uq_card_version"),
        # the Changes page reads the versions written since a time
        Index("ix_card_version_created", "created_at"),
    )

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    # no foreign key, on purpose: cards are never deleted, and every writer adds history in
    # the transaction that writes the card; a per-row key check cost the decay stage a
    # third of its time on a million cards (see migration 0009)
    card_id: uuid.UUID
    version: int
    snapshot: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    reason: str
    actor: str = Field(max_length=128)
    created_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())


class UseArm(StrEnum):
    """Whether a matching card was served to a query or withheld from it (the holdout)."""

    served = "served"
    withheld = "withheld"


class CardUse(SQLModel, table=True):
    """A card served to an agent (or withheld from it), and the outcome later reported."""

    __tablename__ = "card_use"
    # the namespace's uses by time (the overview's uses per day read the entries alone)
    __table_args__ = (Index("ix_card_use_namespace_used", "namespace", "used_at"),)

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    card_id: uuid.UUID = Field(foreign_key="card.card_id", index=True)
    namespace: str = Field(max_length=128)
    used_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    outcome: str | None = Field(default=None, max_length=16)
    context: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    # the holdout arm (served / withheld); None: a use reported without a query
    arm: str | None = Field(default=None, max_length=8)
    # the query that served or withheld it: an outcome reported for one use counts for all
    query_id: uuid.UUID | None = Field(default=None, index=True)


class CardArchive(SQLModel, table=True):
    """A card moved out of retrieval by the decay stage: why, when, and whether restored.

    The card row stays (status 'archived') so its history and evidence stay with it."""

    __tablename__ = "card_archive"

    id: uuid.UUID = Field(default_factory=new_id, primary_key=True)
    card_id: uuid.UUID = Field(index=True)  # no foreign key: as CardVersion.card_id
    namespace: str = Field(max_length=128, index=True)
    run_id: uuid.UUID
    reason: str = Field(max_length=16)  # unused | cap
    detail: str
    confidence: float
    score: float | None = None
    archived_at: datetime = Field(default_factory=utcnow, sa_column=utc_column())
    restored_at: datetime | None = Field(default=None, sa_column=utc_column(nullable=True))
    restored_by: str | None = Field(default=None, max_length=128)
