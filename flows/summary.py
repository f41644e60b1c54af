"""What the nightly flow returns: each stage's own summary, and what failed or came back
(read by flows/nightly.py, which fills it, and flows/report.py, which publishes it).
Nothing here talks to Prefect: the CLI's in-process night fills the same models."""

from __future__ import annotations

from pydantic import BaseModel

from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.decay import DecayReport
from memory_core.facts.stage import FactsReport
from memory_core.ingest.store import IngestReport
from memory_core.retention.stage import RetentionReport
from memory_core.retrospect.summary import RetrospectSummary
from memory_core.validate.summary import ValidationSummary


class RunOutcome(BaseModel):
    """What a run must tell its operator beyond the counts: what failed, what came back."""

    retry_of_run: int = 0  # the attempt number when this is a retry (run_count), else 0
    redriven: int = 0  # runs this flow run had parked, sent back to the queue
    recovered: int = 0  # of those, how many went through this time
    again: int = 0  # of those, how many failed again (parked once more, counted once)
    # "key: error" of every run parked by this run, one line a run ("key: error; facts: error"
    # when both its parts were parked): dead letters are counted by run everywhere
    dead_letters: list[str] = []
    # "key (part): reason" of LLM answers rejected for their content and of drafts refused
    # for failing their grounding or the trust screen: counted, never parked
    rejections: list[str] = []
    failures: list[str] = []  # stages (or parts of them) that failed: "stage: error"


def verdict(outcome: RunOutcome) -> str | None:
    """None when the run is green, else its one-line reason (the Failed state's message)."""
    n, f = len(outcome.dead_letters), len(outcome.failures)
    if not n and not f:
        return None
    parts = []
    if n:
        again = f" ({outcome.again} of {outcome.redriven} re-driven failed again)"
        parts.append(f"{n} dead letter{'s' if n != 1 else ''}{again if outcome.again else ''}")
    if f:
        first = outcome.failures[0].splitlines()[0][:120]
        parts.append(f"{f} failure{'s' if f != 1 else ''} ({first})")
    return f"{', '.join(parts)}: retry this run to re-drive them"


class NightlySummary(BaseModel):
    """What one nightly run did, stage by stage, and what failed or came back."""

    ingested: list[IngestReport] = []
    retrospect: RetrospectSummary = RetrospectSummary()
    facts: FactsReport = FactsReport()
    validation: ValidationSummary = ValidationSummary()
    consolidation: ConsolidateSummary = ConsolidateSummary()
    decay: DecayReport = DecayReport()
    retention: RetentionReport = RetentionReport()
    outcome: RunOutcome = RunOutcome()
