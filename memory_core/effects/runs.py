"""A run's outcome reported once for its query: every served card gets the feedback rule and
its served-arm count, every withheld card its withheld-arm count."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlalchemy.engine import Engine

from memory_core.decay.feedback import Feedback, MeasuredStreak, record_feedback
from memory_core.effects.outcomes import QueryOutcome, count_withheld, served_uses


def record_query_outcome(
    *,
    engine: Engine,
    namespace: str,
    query_id: uuid.UUID,
    outcome: str,
    actor: str = "feedback",
    failures_to_review: int = 3,
    measure: MeasuredStreak | None = None,
    on_feedback: Callable[[Feedback], None] | None = None,
) -> QueryOutcome:
    """Record the outcome of the run that made this query (idempotent: uses that already have
    this outcome are left as they are; a use with the other outcome is refused). on_feedback
    hears each served card's feedback (the service updates its snapshot with it)."""
    served = 0
    for use_id, card_id, had in served_uses(engine=engine, namespace=namespace, query_id=query_id):
        if had == outcome:
            continue
        fb = record_feedback(
            engine=engine,
            namespace=namespace,
            card_id=card_id,
            outcome=outcome,
            use_id=use_id,
            actor=actor,
            failures_to_review=failures_to_review,
            measure=measure,
        )
        if on_feedback is not None:
            on_feedback(fb)
        served += 1
    held = count_withheld(engine=engine, namespace=namespace, query_id=query_id, outcome=outcome)
    return QueryOutcome(query_id=query_id, outcome=outcome, served=served, withheld=held)
