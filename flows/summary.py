"""What the nightly flow returns: each stage's own summary, and what failed or came back
(read by flows/nightly.py, which fills it, and flows/report.py, which publishes it)."""

from __future__ import annotations

from pydantic import BaseModel

from flows.stages import RunOutcome
from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.decay import DecayReport
from memory_core.facts.stage import FactsReport
from memory_core.ingest.store import IngestReport
from memory_core.retrospect.summary import RetrospectSummary
from memory_core.validate.summary import ValidationSummary


class NightlySummary(BaseModel):
    """What one nightly run did, stage by stage, and what failed or came back."""

    ingested: list[IngestReport] = []
    retrospect: RetrospectSummary = RetrospectSummary()
    facts: FactsReport = FactsReport()
    validation: ValidationSummary = ValidationSummary()
    consolidation: ConsolidateSummary = ConsolidateSummary()
    decay: DecayReport = DecayReport()
    outcome: RunOutcome = RunOutcome()
