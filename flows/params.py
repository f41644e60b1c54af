"""Parameter models of the flows (what an operator can set per run in the Prefect UI)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RetrospectParams(BaseModel):
    """Which trajectories to retrospect over."""

    namespace: str | None = Field(default=None, description="only this namespace (None: all)")
    max_batches: int | None = Field(default=None, ge=1, description="stop after this many")


class NightlyParams(BaseModel):
    """The nightly consolidation run."""

    input: list[str] = Field(
        default_factory=list, description="files or folders of trajectories to ingest first"
    )
    namespace: str | None = Field(default=None, description="namespace for ingested runs")
    task_type: str | None = Field(default=None, description="task type for runs without one")
    retrospect: RetrospectParams = RetrospectParams()
