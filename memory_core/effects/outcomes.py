"""Outcomes per holdout arm: a run's outcome counts for every card its query served or withheld.

Served uses are counted where their feedback is recorded (memory_core.decay.feedback, in the
same transaction as the confidence change). The withheld uses of the same query follow in a
transaction of their own, after: it takes the withheld cards' rows in key order and never
while holding the served card's lock (two reports of two queries that served and withheld the
same two cards the other way round cannot deadlock). It is idempotent (only uses without an
outcome are counted), so a repeated report finishes what a crash left undone.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pydantic import BaseModel
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from memory_core.db import session_scope
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.card import Card, CardUse, UseArm


class QueryOutcome(BaseModel):
    """What one reported outcome of a query counted."""

    query_id: uuid.UUID
    outcome: str
    served: int  # served uses that got the outcome now
    withheld: int  # withheld uses that got it now


def count_withheld(*, engine: Engine, namespace: str, query_id: uuid.UUID, outcome: str) -> int:
    """Give the query's withheld uses that have no outcome this one, and count it on their
    cards (withheld_outcomes, withheld_successes); the number of uses counted."""
    _check(outcome)
    with session_scope(engine) as session:
        return _count_withheld(session, namespace, query_id, outcome)


def _count_withheld(session: Session, namespace: str, query_id: uuid.UUID, outcome: str) -> int:
    rows = session.execute(
        select(CardUse.id, CardUse.card_id)
        .where(
            col(CardUse.query_id) == query_id,
            col(CardUse.namespace) == namespace,
            col(CardUse.arm) == UseArm.withheld.value,
            col(CardUse.outcome).is_(None),
        )
        .order_by(col(CardUse.card_id))
        .with_for_update()
    ).all()
    if not rows:
        return 0
    use_ids = [r[0] for r in rows]
    card_ids = sorted({r[1] for r in rows}, key=str)
    session.execute(update(CardUse).where(col(CardUse.id).in_(use_ids)).values(outcome=outcome))
    won = 1 if outcome == "success" else 0
    # not a change of the card (no version, no history): the served set stays as it is
    session.execute(
        update(Card)
        .where(col(Card.card_id).in_(card_ids), col(Card.namespace) == namespace)
        .values(
            withheld_outcomes=col(Card.withheld_outcomes) + 1,
            withheld_successes=col(Card.withheld_successes) + won,
        )
    )
    return len(rows)


def served_uses(
    *, engine: Engine, namespace: str, query_id: uuid.UUID
) -> Sequence[tuple[uuid.UUID, uuid.UUID, str | None]]:
    """The query's served uses: (use id, card id, outcome so far); NotFound when the query
    recorded no use at all in this namespace."""
    with session_scope(engine) as session:
        rows = session.execute(
            select(CardUse.id, CardUse.card_id, CardUse.outcome, CardUse.arm).where(
                col(CardUse.query_id) == query_id, col(CardUse.namespace) == namespace
            )
        ).all()
    if not rows:
        raise NotFound(f"no uses of query {query_id} in namespace {namespace!r}")
    return [(r[0], r[1], r[2]) for r in rows if r[3] == UseArm.served.value]


def _check(outcome: str) -> None:
    if outcome not in ("success", "failure"):
        raise InvalidInput(f"outcome must be success or failure, not {outcome!r}", field="outcome")
