"""The human review queue: list, approve, reject, edit (re-validated); every decision in history."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from sqlalchemy import case, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.draft_rows import card_snapshot
from memory_core.db import session_scope
from memory_core.errors import InvalidInput, NotFound
from memory_core.facts.store import approve_fact
from memory_core.models.card import Card, CardKind, CardStatus, CardVersion
from memory_core.models.columns import utcnow
from memory_core.screen.gate import screen_card
from memory_core.screen.provenance import TRUST, Origin
from memory_core.validate.rows import check_cards

EDITABLE = {
    "scenario",
    "preconditions",
    "action_sequence",
    "expected_outcome",
    "actual_outcome",
    "failure_modes",
    "confidence",
}


# riskiest first: quarantined cards, then by origin, least trusted first (an operator's write
# waiting here is a non-admin key's, so it comes before the agent's own actions)
RISK_ORDER: tuple[Origin, ...] = tuple(
    sorted(TRUST, key=lambda o: (TRUST[o], o is Origin.agent_action))
)


def risk_rank() -> Any:
    """A SQL expression ranking cards for review: 0 quarantined, then one rank per origin in
    RISK_ORDER (a row without a typed origin ranks with the agent's actions)."""
    origin = col(Card.provenance)["origin"].as_string()
    whens = [(col(Card.status) == CardStatus.quarantined.value, 0)]
    whens += [(origin == o.value, i + 1) for i, o in enumerate(RISK_ORDER)]
    return case(*whens, else_=RISK_ORDER.index(Origin.agent_action) + 1)


def review_queue(
    *, engine: Engine, namespace: str, limit: int = 100, quarantined: bool = False
) -> list[Card]:
    """Cards waiting for a person, riskiest first: by origin (an LLM's inference, a user's
    statement, a tool's text, a non-admin operator's write, then the agent's own actions),
    then oldest first; with `quarantined`, the quarantined cards ahead of them all."""
    statuses = [CardStatus.review.value]
    statuses += [CardStatus.quarantined.value] if quarantined else []
    with Session(engine) as session:
        return list(
            session.execute(
                select(Card)
                .where(col(Card.namespace) == namespace, col(Card.status).in_(statuses))
                .order_by(risk_rank(), col(Card.created_at), col(Card.card_id))
                .limit(limit)
            ).scalars()
        )


def _in_review(session: Session, namespace: str, card_id: uuid.UUID) -> Card:
    card = session.get(Card, card_id, with_for_update=True)
    if card is None or card.namespace != namespace:
        raise NotFound(f"no card {card_id} in namespace {namespace!r}")
    if card.status != CardStatus.review.value:
        raise InvalidInput(f"card {card_id} is {card.status}, not in review", field="card_id")
    return card


def _record(session: Session, card: Card, *, reason: str, actor: str, fields: list[str]) -> None:
    card.version += 1
    card.updated_at = utcnow()
    session.add(card)
    session.add(
        CardVersion(
            card_id=card.card_id,
            version=card.version,
            # the fields this actor changed: the history's diff shows these, not what uses
            # and feedback moved since the previous version
            snapshot={**card_snapshot(card.model_dump()), "changed_fields": fields},
            reason=reason,
            actor=actor,
        )
    )


def decide(
    *,
    engine: Engine,
    namespace: str,
    card_id: uuid.UUID,
    approve: bool,
    actor: str,
    reason: str | None = None,
) -> Card:
    """Approve (active) or reject a card in review; who and why go into its history."""
    if not approve and not (reason and reason.strip()):
        raise InvalidInput("a rejection needs a reason", field="reason")
    with session_scope(engine) as session:
        card = _in_review(session, namespace, card_id)
        card.status = (CardStatus.active if approve else CardStatus.rejected).value
        verb = "approved" if approve else "rejected"
        if approve and card.kind == CardKind.fact.value:
            session.flush()  # the older value is read without this card in the active set
            approve_fact(session, card, actor=actor)
        _record(
            session,
            card,
            reason=f"{verb} in review" + (f": {reason}" if reason else ""),
            actor=actor,
            fields=["status"],
        )
        return card


def edit(
    *,
    engine: Engine,
    namespace: str,
    card_id: uuid.UUID,
    changes: dict[str, Any],
    actor: str,
    registry: frozenset[str] | None = None,
) -> Card:
    """Change fields of a card in review; saved only if the edited card passes the suite."""
    unknown = set(changes) - EDITABLE
    if unknown:
        raise InvalidInput(
            f"cannot edit {sorted(unknown)}; editable: {sorted(EDITABLE)}", field="changes"
        )
    with session_scope(engine) as session:
        card = _in_review(session, namespace, card_id)
        try:
            edited = Card.model_validate({**card.model_dump(), **changes})
        except ValidationError as exc:  # a bad value is the caller's error, named, not a crash
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidInput(f"the edit fails validation: {problems}", field="changes") from exc
        failures = check_cards([edited], registry=registry)  # the suite's rules
        if failures:
            raise InvalidInput(
                "the edited card fails validation: " + "; ".join(failures[str(card_id)]),
                field="changes",
            )
        for k, v in changes.items():
            setattr(card, k, v)
        injected = screen_card(edited.model_dump())
        if injected:  # an edit cannot slip an instruction past the screen
            card.status = CardStatus.quarantined.value
            card.provenance = {**card.provenance, "flags": injected}
        _record(
            session,
            card,
            reason=f"edited in review: {', '.join(sorted(changes))}"
            + (f"; quarantined: {'; '.join(injected)}" if injected else ""),
            actor=actor,
            fields=sorted(changes) + (["status", "provenance"] if injected else []),
        )
        return card
