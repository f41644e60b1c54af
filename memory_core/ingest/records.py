"""What every input record shares, whatever its format: the common fields, the outcome they
give, and the content hash that stores the same run once (formats.py and conversations.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memory_core.models.trajectory import Outcome

SUCCESS_REWARD = 0.5  # a reward at or above this counts as success when no outcome is given


class RecordCommon(BaseModel):
    """The fields every trajectory or conversation record may carry besides its steps."""

    model_config = ConfigDict(extra="allow")
    outcome: Literal["success", "failure", "unknown"] | None = None
    reward: float | None = None
    task_type: str | None = Field(default=None, min_length=1, max_length=128)
    agent_id: str | None = Field(default=None, max_length=128)
    namespace: str | None = Field(default=None, min_length=1, max_length=128)
    metadata: dict[str, Any] = {}


def outcome_of(rec: RecordCommon) -> Outcome:
    """The record's outcome, else its reward against SUCCESS_REWARD, else unknown."""
    if rec.outcome:
        return Outcome(rec.outcome)
    if rec.reward is not None:
        return Outcome.success if rec.reward >= SUCCESS_REWARD else Outcome.failure
    return Outcome.unknown


def content_hash(record: dict[str, Any]) -> str:
    """sha256 of the record's canonical JSON: the same run submitted twice hashes the same."""
    canon = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()
