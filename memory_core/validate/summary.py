"""What one validation run decided: the stage returns it, the task, the flow and the CLI pass
it on as it is (no re-listed copy)."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, Field


class ValidationSummary(BaseModel):
    """What one validation run decided."""

    # the run's row in validation_run (`hindsight validate report`); not in the summary shown
    run_id: uuid.UUID | None = Field(default=None, exclude=True)
    evaluated: int = 0
    activated: int = 0
    review: int = 0
    rejected: int = 0
    rule_failures: dict[str, int] = {}
    docs_index: str | None = None
    deferred: int = 0  # failing LLM drafts kept as drafts: regeneration waits for the LLM
