"""The counts of retrospection: one batch as the stage returns it, and a run's totals. The
stage, the tasks, the flow and the CLI pass these models as they are (no re-listed copies)."""

from __future__ import annotations

from pydantic import BaseModel


class BatchResult(BaseModel):
    """What one retrospect batch did."""

    claimed: int = 0
    done: int = 0
    dead_letters: int = 0
    deferred: int = 0
    cards_created: int = 0
    evidence_added: int = 0
    llm_calls: int = 0
    tokens_sent: int = 0
    tokens_received: int = 0
    tokens_saved: int = 0
    # runs whose LLM answer was wrong by content (done, not parked), and of those how many
    # had been rejected the same way before (a re-drive that could not cure them)
    rejected: int = 0
    rejected_again: int = 0
    # drafts refused on their way to the store (failed grounding or the trust screen): stored
    # as rejected or quarantined cards with their reasons, counted as rejections
    drafts_rejected: int = 0
    errors: list[str] = []

    def add(self, other: BatchResult) -> None:
        """Accumulate another batch's counts into this one."""
        for name in type(self).model_fields:
            if name != "errors":
                setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.extend(other.errors)


class RetrospectSummary(BaseModel):
    """Totals over all batches of one retrospect run."""

    batches: int = 0
    trajectories: int = 0
    dead_letters: int = 0
    deferred: int = 0
    cards_created: int = 0
    evidence_added: int = 0
    llm_calls: int = 0
    tokens_sent: int = 0
    tokens_received: int = 0
    tokens_saved: int = 0
    rejected: int = 0
    rejected_again: int = 0
    drafts_rejected: int = 0
    budget_exhausted: bool = False
    # LLM calls that failed for good (each try of a run whose LLM part was parked), by why
    llm_failed_calls: int = 0
    llm_failures: dict[str, int] = {}

    def failed_call(self, why: str, tries: int) -> None:
        """Count a run's LLM part that failed after `tries` calls, under its reason."""
        self.llm_failed_calls += tries
        self.llm_failures[why] = self.llm_failures.get(why, 0) + tries

    def add(self, batch: BatchResult) -> None:
        """Count one batch in: the counts both models name are summed."""
        self.batches += 1
        self.trajectories += batch.claimed - batch.deferred
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + getattr(batch, name))


_SUMMED = [n for n in RetrospectSummary.model_fields if n in BatchResult.model_fields]
