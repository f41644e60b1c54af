"""The writing half of the service: feedback, stored cards, facts, ingest, the review queue.

Layer: service.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine

from memory_core.cards.query import to_public
from memory_core.decay.feedback import Feedback, record_feedback, streak_rule
from memory_core.errors import InvalidInput
from memory_core.facts.search import FactHit, search_facts
from memory_core.facts.store import FactIn, forget_fact, write_fact
from memory_core.ingest.otlp.receive import TraceReport, ingest_spans
from memory_core.ingest.otlp.spans import decode
from memory_core.ingest.store import IngestReport, ingest
from memory_core.models.card import CardPublic, CardStatus
from memory_core.serve.keys import Principal
from memory_core.serve.schemas import CardIn, FeedbackRequest
from memory_core.serve.snapshot import touched
from memory_core.serve.snapshot_cache import SnapshotCache
from memory_core.serve.store import store_card
from memory_core.serve.uses import UseRecorder
from memory_core.settings import Settings
from memory_core.validate.review import decide, review_queue


class WriteOperations:
    """Operations that change cards; each checks the key's scope and stays in its namespace."""

    engine: Engine
    settings: Settings
    snapshots: SnapshotCache
    uses: UseRecorder

    def feedback(
        self, *, principal: Principal, card_id: uuid.UUID, request: FeedbackRequest
    ) -> Feedback:
        """The outcome of a task that used the card: confidence up or down, review after
        repeated failures."""
        # a reader reports how a use it was served worked out (one outcome per use); an
        # outcome tied to no use needs write, else any reader could push cards to review
        principal.require("read" if request.use_id is not None else "write")
        if request.use_id is not None:
            self.uses.flush()  # the use row may still be queued
        fb = record_feedback(
            engine=self.engine,
            namespace=principal.namespace,
            card_id=card_id,
            outcome=request.outcome,
            use_id=request.use_id,
            actor=principal.actor,
            failures_to_review=self.settings.review.failures_in_a_row,
            measure=streak_rule(self.settings, principal.namespace),
        )
        snap = self.snapshots.get(principal.namespace)
        snap.rows.pop(card_id, None)  # counts and confidence changed: read it again
        entry = snap.entries.get(card_id)
        if entry is not None:
            entry.confidence = fb.confidence
            entry.broken = entry.broken or fb.status != CardStatus.active.value
            touched(entry)
        return fb

    def store_card(self, *, principal: Principal, card: CardIn, via: str = "api") -> CardPublic:
        """Validate and store a card written by an operator or agent (write scope)."""
        s = self.settings
        row = store_card(
            engine=self.engine,
            principal=principal,
            card=card,
            via=via,
            review_below=s.review.below,
            registry=s.review.registry,
            max_expression_chars=s.limits.max_expression_chars,
            max_expression_depth=s.limits.max_expression_depth,
            max_preconditions=s.limits.max_preconditions,
            screen=s.screen,
        )
        self.snapshots.written([principal.namespace])
        return to_public(row)

    def search_facts(
        self,
        *,
        principal: Principal,
        text: str,
        top_k: int = 5,
        include_superseded: bool = False,
        include_claims: bool = False,
        as_of: datetime | None = None,
    ) -> list[FactHit]:
        """Facts of the namespace by keyword relevance (BM25) and the decay-aware score; claims
        (a speaker's word alone) only with include_claims; as_of: those true at that moment."""
        principal.require("read")
        return search_facts(
            engine=self.engine,
            namespace=principal.namespace,
            text=text,
            top_k=top_k,
            include_superseded=include_superseded,
            include_claims=include_claims,
            weights=self.settings.ranking,
            as_of=as_of,
        )

    def write_fact(self, *, principal: Principal, fact: FactIn) -> CardPublic:
        """Remember a fact; an older value for the same key and query is superseded. A
        non-admin key's fact waits in review (like its cards) until a person approves it."""
        principal.require("write")
        return write_fact(
            engine=self.engine,
            namespace=principal.namespace,
            fact=fact,
            actor=principal.actor,
            screen=self.settings.screen,
            review=self.settings.screen and not principal.allows("admin"),
        )

    def forget_fact(self, *, principal: Principal, fact_id: uuid.UUID) -> CardPublic:
        """Take a fact out of retrieval (kept in history)."""
        principal.require("write")
        return forget_fact(
            engine=self.engine,
            namespace=principal.namespace,
            fact_id=fact_id,
            actor=principal.actor,
        )

    def ingest(self, *, principal: Principal, records: Sequence[Any]) -> IngestReport:
        """Store trajectories for the nightly run (idempotent); records of another namespace
        are refused."""
        principal.require("write")
        ns = principal.namespace
        named: list[tuple[str, Any]] = []
        for i, r in enumerate(records):
            name = f"trajectories[{i}]"
            if isinstance(r, dict) and r.get("namespace") not in (None, ns):
                named.append((name, InvalidInput("namespace differs from the key's", record=name)))
            else:
                named.append((name, r))
        return ingest(
            engine=self.engine,
            records=named,
            namespace=ns,
            task_type=self.settings.default_task_type,
            max_observation_chars=self.settings.limits.max_observation_chars,
            limits=self.settings.limits,
        )

    def ingest_traces(self, *, principal: Principal, body: bytes, content_type: str) -> TraceReport:
        """OTLP spans (JSON or protobuf) as trajectories once their trace's root span is in;
        the rest wait in the buffer for serve.trace_root_wait_s (write scope)."""
        principal.require("write")
        decoded = decode(body, content_type)
        report = ingest_spans(
            engine=self.engine,
            namespace=principal.namespace,
            spans=decoded.spans,
            task_type=self.settings.default_task_type,
            limits=self.settings.limits,
            wait=timedelta(seconds=self.settings.serve.trace_root_wait_s),
        )
        report.rejected_spans = decoded.rejected
        return report

    # -- review (admin) ----------------------------------------------------------------

    def review_queue(self, *, principal: Principal, limit: int = 100) -> list[CardPublic]:
        """Cards waiting for a person, riskiest origin first, then oldest first."""
        principal.require("admin")
        cards = review_queue(engine=self.engine, namespace=principal.namespace, limit=limit)
        return [to_public(c) for c in cards]

    def decide(
        self, *, principal: Principal, card_id: uuid.UUID, approve: bool, reason: str | None
    ) -> CardPublic:
        """Approve (active) or reject a card in review."""
        principal.require("admin")
        card = decide(
            engine=self.engine,
            namespace=principal.namespace,
            card_id=card_id,
            approve=approve,
            actor=principal.actor,
            reason=reason,
        )
        self.snapshots.written([principal.namespace])
        return to_public(card)
