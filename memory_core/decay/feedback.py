"""Uses and outcome feedback: what agents report back about the cards they were served."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.db import session_scope
from memory_core.effects.estimate import newcombe
from memory_core.effects.outcomes import count_withheld
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.card import Card, CardStatus, CardUse, CardVersion, UseArm
from memory_core.models.columns import new_id, utcnow
from memory_core.settings import Settings

Outcome = Literal["success", "failure"]
SUCCESS_GAIN = 0.05
FAILURE_LOSS = 0.1


@dataclass(frozen=True)
class MeasuredStreak:
    """With the holdout on, a failure streak sends a card to review only once the card is
    measured: its effect interval (served - withheld, Newcombe at z) lies below zero, or its
    withheld arm has min_withheld outcomes. Before that, a streak says little: the runs that
    were served the card may have failed as often without it."""

    min_withheld: int
    z: float

    def measured(self, card: Card) -> bool:
        """Whether the card's outcomes so far are enough to judge it by a streak."""
        if card.withheld_outcomes >= self.min_withheld:
            return True
        if card.served_outcomes <= 0 or card.withheld_outcomes <= 0:
            return False
        _, _, high = newcombe(
            k1=card.served_successes,
            n1=card.served_outcomes,
            k2=card.withheld_successes,
            n2=card.withheld_outcomes,
            z=self.z,
        )
        return high < 0


def streak_rule(settings: Settings, namespace: str) -> MeasuredStreak | None:
    """The streak rule of a namespace: measured first when its holdout is on, else None (the
    plain rule: every n-th failure in a row sends the card to review)."""
    if settings.holdout.rate_for(namespace) <= 0:
        return None
    return MeasuredStreak(
        min_withheld=settings.review.streak_min_withheld, z=settings.decay.effects.z
    )


class Feedback(BaseModel):
    """A card after one outcome was recorded for it."""

    card_id: uuid.UUID
    use_id: uuid.UUID
    outcome: Outcome
    recorded: bool  # False: this use already had this outcome (a repeated report)
    confidence_before: float
    confidence: float
    success_count: int
    failure_count: int
    consecutive_failures: int
    status: str
    sent_to_review: bool
    version: int
    held_for_measure: bool = False  # a streak that waits for the card's effect to be measured


def record_use(
    *,
    session: Session,
    namespace: str,
    card_ids: Sequence[uuid.UUID],
    context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> dict[uuid.UUID, uuid.UUID]:
    """Cards served to an agent: a use row each, use_count + 1, last_used_at = now, and the
    decay tier reset, so a card used again can fade again later. Returns card -> use id."""
    if not card_ids:
        return {}
    now = now or utcnow()
    ids = list(dict.fromkeys(card_ids))
    session.execute(
        update(Card)
        .where(col(Card.namespace) == namespace, col(Card.card_id).in_(ids))
        .values(use_count=col(Card.use_count) + 1, last_used_at=now, decay_tier=0)
    )
    uses = {cid: new_id() for cid in ids}
    session.execute(
        insert(CardUse),
        [
            {
                "id": uid,
                "card_id": cid,
                "namespace": namespace,
                "used_at": now,
                "outcome": None,
                "context": context or {},
            }
            for cid, uid in uses.items()
        ],
    )
    return uses


def record_feedback(
    *,
    engine: Engine,
    namespace: str,
    card_id: uuid.UUID,
    outcome: str,
    use_id: uuid.UUID | None = None,
    actor: str = "feedback",
    failures_to_review: int = 3,
    measure: MeasuredStreak | None = None,
    context: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Feedback:
    """Record that a task using the card succeeded (+0.05) or failed (-0.1), within 0..1.

    With use_id, the outcome belongs to a use recorded when the card was served; without
    it, this is a new use. Every failures_to_review-th failure in a row sends an active card
    to review (out of retrieval), with the reason in its history; with `measure` (the holdout
    on: streak_rule), only once the card is measured, and then at the first failure of a streak
    of at least failures_to_review that finds it so. A use the holdout served
    counts for the card's served arm; the cards its query withheld get the same outcome for
    their withheld arm (memory_core.effects.outcomes, right after)."""
    fb, query_id = _record(
        engine=engine,
        namespace=namespace,
        card_id=card_id,
        outcome=outcome,
        use_id=use_id,
        actor=actor,
        failures_to_review=failures_to_review,
        measure=measure,
        context=context,
        now=now,
    )
    if query_id is not None:
        count_withheld(engine=engine, namespace=namespace, query_id=query_id, outcome=outcome)
    return fb


def _record(
    *,
    engine: Engine,
    namespace: str,
    card_id: uuid.UUID,
    outcome: str,
    use_id: uuid.UUID | None,
    actor: str,
    failures_to_review: int,
    measure: MeasuredStreak | None,
    context: dict[str, Any] | None,
    now: datetime | None,
) -> tuple[Feedback, uuid.UUID | None]:
    if outcome not in ("success", "failure"):
        raise InvalidInput(f"outcome must be success or failure, not {outcome!r}", field="outcome")
    result: Outcome = "success" if outcome == "success" else "failure"
    if failures_to_review < 1:
        raise InvalidInput("must be at least 1", field="failures_to_review")
    now = now or utcnow()
    with session_scope(engine) as session:
        card = session.get(Card, card_id, with_for_update=True)
        if card is None or card.namespace != namespace:
            raise NotFound(f"no card {card_id} in namespace {namespace!r}")
        before = card.confidence
        if use_id is not None:
            use = session.get(CardUse, use_id, with_for_update=True)
            if use is None or use.card_id != card_id:
                raise NotFound(f"no use {use_id} of card {card_id}")
            if use.outcome == outcome:  # the same report twice changes nothing
                fb = _result(card, use.id, result, before, recorded=False, review=False)
                return fb, use.query_id
            if use.outcome is not None:
                raise InvalidInput(
                    f"use {use_id} already has the outcome {use.outcome}", field="outcome"
                )
            use.outcome = outcome
            if use.arm == UseArm.served.value:  # the holdout's served arm
                card.served_outcomes += 1
                card.served_successes += outcome == "success"
        else:
            use = CardUse(
                card_id=card_id,
                namespace=namespace,
                used_at=now,
                outcome=outcome,
                context=context or {},
            )
            card.use_count += 1
            card.last_used_at = now
            card.decay_tier = 0  # used again: every decay tier may apply again later
        session.add(use)
        if outcome == "success":
            card.confidence = round(min(1.0, card.confidence + SUCCESS_GAIN), 6)
            card.success_count += 1
            card.consecutive_failures = 0
        else:
            card.confidence = round(max(0.0, card.confidence - FAILURE_LOSS), 6)
            card.failure_count += 1
            card.consecutive_failures += 1
        # every n-th failure in a row: a card approved again after review gets n more tries
        streak = (
            outcome == "failure"
            and card.status == CardStatus.active.value
            and card.consecutive_failures >= failures_to_review
        )
        nth = card.consecutive_failures % failures_to_review == 0
        held = False
        if streak and measure is not None:
            # a streak that found the card unmeasured sends it once the measure arrives
            measured = measure.measured(card)
            held = not measured
            review = measured and (nth or _was_held(session, card))
        else:
            review = streak and nth
        if review:
            card.status = CardStatus.review.value
            reason = (
                f"{card.consecutive_failures} failures in a row: sent to review "
                f"(confidence {before:.2f} -> {card.confidence:.2f})"
            )
            if measure is not None:
                reason += f"; measured: {_arms(card)}"
        elif held and measure is not None:
            reason = (
                f"{card.consecutive_failures} failures in a row: kept in service until measured "
                f"(needs {measure.min_withheld} withheld outcomes or an effect interval below 0; "
                f"{_arms(card)}); confidence {before:.2f} -> {card.confidence:.2f}"
            )
        else:
            sign = "+" if outcome == "success" else "-"
            step = SUCCESS_GAIN if outcome == "success" else FAILURE_LOSS
            reason = (
                f"feedback: {outcome} ({sign}{step:g}), "
                f"confidence {before:.2f} -> {card.confidence:.2f}"
            )
        card.updated_at = now
        session.add(card)
        # an outcome is a counter and a line of the use log, not a version: only a change of
        # status (sent to review) or the first hold of a streak is the card's history
        if review or (held and not _was_held(session, card)):
            card.version += 1
            session.add(_version(card, use.id, outcome, before, held, reason, actor, now))
        fb = _result(card, use.id, result, before, recorded=True, review=review)
        fb.held_for_measure = held
        return fb, use.query_id


def _version(
    card: Card,
    use_id: uuid.UUID,
    outcome: str,
    before: float,
    held: bool,
    reason: str,
    actor: str,
    now: datetime,
) -> CardVersion:
    return CardVersion(
        card_id=card.card_id,
        version=card.version,
        snapshot={
            "outcome": outcome,
            "use_id": str(use_id),
            "status": card.status,
            "confidence": card.confidence,
            "confidence_before": before,
            "consecutive_failures": card.consecutive_failures,
            **({"held_for_measure": True} if held else {}),
        },
        reason=reason,
        actor=actor,
        created_at=now,
    )


def _was_held(session: Session, card: Card) -> bool:
    """Whether the card's last recorded change held a streak until it was measured."""
    last = session.execute(
        select(col(CardVersion.snapshot))
        .where(col(CardVersion.card_id) == card.card_id)
        .order_by(col(CardVersion.version).desc())
        .limit(1)
    ).scalar_one_or_none()
    return bool(last and last.get("held_for_measure"))


def _arms(card: Card) -> str:
    return (
        f"served {card.served_successes}/{card.served_outcomes} succeeded, "
        f"withheld {card.withheld_successes}/{card.withheld_outcomes}"
    )


def _result(
    card: Card, use_id: uuid.UUID, outcome: Outcome, before: float, *, recorded: bool, review: bool
) -> Feedback:
    return Feedback(
        card_id=card.card_id,
        use_id=use_id,
        outcome=outcome,
        recorded=recorded,
        confidence_before=before,
        confidence=card.confidence,
        success_count=card.success_count,
        failure_count=card.failure_count,
        consecutive_failures=card.consecutive_failures,
        status=card.status,
        sent_to_review=review,
        version=card.version,
    )
