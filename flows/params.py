"""Parameter models of the flows (what an operator can set per run in the Prefect UI)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from memory_core.settings import DecayRules


class RetrospectParams(BaseModel):
    """Which trajectories to retrospect over."""

    namespace: str | None = Field(default=None, description="only this namespace (None: all)")
    max_batches: int | None = Field(default=None, ge=1, description="stop after this many")


class ConsolidateParams(BaseModel):
    """Which namespace to consolidate, and whether to write."""

    namespace: str | None = Field(default=None, description="only this namespace (None: all)")
    dry_run: bool = Field(default=False, description="plan only: list the merges, write nothing")


class DecayFlowParams(BaseModel):
    """The decay stage: time decay, the unused archive, the cap (rules: the settings')."""

    namespace: str | None = Field(default=None, description="only this namespace (None: all)")
    dry_run: bool = Field(default=False, description="plan only: list the changes, write nothing")
    rules: DecayRules | None = Field(
        default=None, description="tiers, archive threshold, cap (None: HINDSIGHT_DECAY__*)"
    )
    now: datetime | None = Field(default=None, description="a frozen clock (UTC); None: now")


class NightlyParams(BaseModel):
    """The nightly consolidation run."""

    input: list[str] = Field(
        default_factory=list, description="files or folders of trajectories to ingest first"
    )
    namespace: str | None = Field(default=None, description="namespace for ingested runs")
    task_type: str | None = Field(default=None, description="task type for runs without one")
    retrospect: RetrospectParams = RetrospectParams()
    consolidate: ConsolidateParams = ConsolidateParams()
    decay: DecayFlowParams = DecayFlowParams()
