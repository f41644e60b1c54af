"""The service's holdout operations: a run's outcome for its query, pins, the effects report.

Layer: service.
"""

from __future__ import annotations

import uuid

from sqlalchemy.engine import Engine

from memory_core.cards.query import to_public
from memory_core.decay.feedback import Feedback, streak_rule
from memory_core.effects.outcomes import QueryOutcome
from memory_core.effects.pins import set_pinned
from memory_core.effects.report import EffectsReport, effects_report
from memory_core.effects.runs import record_query_outcome
from memory_core.models.card import CardPublic, CardStatus
from memory_core.serve.keys import Principal
from memory_core.serve.schemas import OutcomeRequest
from memory_core.serve.snapshot import touched
from memory_core.serve.snapshot_cache import SnapshotCache
from memory_core.serve.uses import UseRecorder
from memory_core.settings import Settings


class EffectOperations:
    """Mixed into MemoryService (which sets these attributes)."""

    engine: Engine
    settings: Settings
    snapshots: SnapshotCache
    uses: UseRecorder

    def report_outcome(
        self, *, principal: Principal, query_id: uuid.UUID, request: OutcomeRequest
    ) -> QueryOutcome:
        """The outcome of the run that made a query: for the cards it served and withheld."""
        principal.require("read")  # as feedback on a use: a reader reports its own runs
        self.uses.flush()  # the query's use rows may still be queued
        snap = self.snapshots.get(principal.namespace)

        def follow(fb: Feedback) -> None:  # as WriteOperations.feedback: no reload per report
            snap.rows.pop(fb.card_id, None)
            entry = snap.entries.get(fb.card_id)
            if entry is not None:
                entry.confidence = fb.confidence
                entry.broken = entry.broken or fb.status != CardStatus.active.value
                touched(entry)

        return record_query_outcome(
            engine=self.engine,
            namespace=principal.namespace,
            query_id=query_id,
            outcome=request.outcome,
            actor=principal.actor,
            failures_to_review=self.settings.review.failures_in_a_row,
            measure=streak_rule(self.settings, principal.namespace),
            on_feedback=follow,
        )

    def pin(self, *, principal: Principal, card_id: uuid.UUID, pinned: bool) -> CardPublic:
        """Pin a card (never withheld) or unpin it (admin)."""
        principal.require("admin")
        card = set_pinned(
            engine=self.engine,
            namespace=principal.namespace,
            card_id=card_id,
            pinned=pinned,
            actor=principal.actor,
        )
        self.snapshots.written([principal.namespace])
        return to_public(card)

    def effects(self, *, principal: Principal, limit: int = 200) -> EffectsReport:
        """Cards of the namespace by measured effect."""
        principal.require("read")
        return effects_report(
            engine=self.engine,
            namespace=principal.namespace,
            rules=self.settings.decay.effects,
            limit=limit,
        )
