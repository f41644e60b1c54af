"""What the nightly flow returns: each stage's own summary, and what failed or came back
(read by flows/nightly.py, which fills it, and flows/report.py, which publishes it)."""

from __future__ import annotations

from pydantic import BaseModel

from flows.stages import RunOutcome
from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.retrospect.summary import RetrospectSummary
from memory_core.validate.summary import ValidationSummary
from tasks.decay import DecaySummary
from tasks.facts import FactsSummary
from tasks.ingest import IngestSummary


class NightlySummary(BaseModel):
    """What one nightly run did, stage by stage, and what failed or came back."""

    ingested: list[IngestSummary] = []
    retrospect: RetrospectSummary = RetrospectSummary()
    facts: FactsSummary = FactsSummary()
    validation: ValidationSummary = ValidationSummary()
    consolidation: ConsolidateSummary = ConsolidateSummary()
    decay: DecaySummary = DecaySummary()
    outcome: RunOutcome = RunOutcome()
