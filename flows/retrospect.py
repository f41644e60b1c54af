"""The retrospect flow: batches of pending trajectories until none is left."""

from __future__ import annotations

from prefect import flow
from pydantic import BaseModel

from flows.naming import run_name
from flows.params import RetrospectParams
from memory_core.retrospect.claims import worker_id
from memory_core.settings import Settings
from tasks.retrospect import BatchSummary, retrospect_batch


class RetrospectSummary(BaseModel):
    """Totals over all batches of one retrospect run."""

    batches: int = 0
    trajectories: int = 0
    dead_letters: int = 0
    cards_created: int = 0
    evidence_added: int = 0

    def add(self, b: BatchSummary) -> None:
        """Count one batch in."""
        self.batches += 1
        self.trajectories += b.claimed
        self.dead_letters += b.dead_letters
        self.cards_created += b.cards_created
        self.evidence_added += b.evidence_added


def run_retrospect(params: RetrospectParams, settings: Settings) -> RetrospectSummary:
    """Submit retrospect-batch tasks one after another until a claim comes back empty."""
    summary = RetrospectSummary()
    worker = worker_id()
    while params.max_batches is None or summary.batches < params.max_batches:
        batch = retrospect_batch(summary.batches + 1, params.namespace, worker, settings)
        if batch.claimed == 0:
            break
        summary.add(batch)
    return summary


@flow(name="retrospect", flow_run_name=run_name("retrospect"), log_prints=True)
def retrospect(params: RetrospectParams = RetrospectParams()) -> RetrospectSummary:
    """Distil cards from every pending trajectory (rule extractor on embedded defaults)."""
    return run_retrospect(params, Settings())
