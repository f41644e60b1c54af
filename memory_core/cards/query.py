"""Reading cards: list with filters, get one with its evidence, an example task state.

Ranking by task state is the serve service's (memory_core/serve/service.py), for the API,
the MCP server and `hindsight cards query` alike."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session, col

from memory_core.cards.filters import CardFilter, card_filters
from memory_core.effects.estimate import HarmsTest, estimate
from memory_core.effects.fdr import harms_tests
from memory_core.errors import NotFound
from memory_core.models.backtest import CardBacktest
from memory_core.models.card import Card, CardEvidence, CardPublic, CardStatus, EvidenceTriple
from memory_core.preconditions import compile_stored
from memory_core.redact.fields import redact_evidence, redact_fields
from memory_core.settings import EffectRules


def to_public(
    card: Card,
    evidence: Sequence[CardEvidence] = (),
    *,
    rules: EffectRules | None = None,
    harms: HarmsTest | None = None,
) -> CardPublic:
    """The reader's view of a card; its effect judged by these rules (default: the defaults)
    and its harms test within the namespace (memory_core.effects.cards.tests_for)."""
    # served text is redacted again (defence in depth: cards written before redaction, or by
    # a path that missed it, still never hand a secret to an agent)
    data = redact_fields(card.model_dump())
    data["effect"] = estimate(
        served_uses=card.served_outcomes,
        served_successes=card.served_successes,
        withheld_uses=card.withheld_outcomes,
        withheld_successes=card.withheld_successes,
        rules=rules,
        harms=harms,
    )
    data["evidence"] = [
        EvidenceTriple(
            trajectory_id=e.trajectory_id,
            step=e.step,
            **redact_evidence({"condition": e.condition, "action": e.action, "result": e.result}),
        )
        for e in evidence
    ]
    return CardPublic.model_validate(data)


def list_cards(
    *,
    session: Session,
    namespace: str,
    statuses: Sequence[str] | None = None,
    kind: str | None = None,
    text: str | None = None,
    min_confidence: float | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[Card]:
    """Cards of a namespace, newest first, filtered by status, kind, scenario text, confidence."""
    q = _filtered(select(Card), namespace, statuses, kind, text, min_confidence)
    q = q.order_by(col(Card.updated_at).desc(), col(Card.card_id)).offset(offset).limit(limit)
    return list(session.execute(q).scalars())


def count_cards(
    *,
    session: Session,
    namespace: str,
    statuses: Sequence[str] | None = None,
    kind: str | None = None,
    text: str | None = None,
    min_confidence: float | None = None,
) -> int:
    """How many cards list_cards would page through with these filters."""
    q = _filtered(
        select(func.count()).select_from(Card), namespace, statuses, kind, text, min_confidence
    )
    return int(session.execute(q).scalar_one())


def _filtered(
    q: Any,
    namespace: str,
    statuses: Sequence[str] | None,
    kind: str | None,
    text: str | None,
    min_confidence: float | None,
) -> Any:
    f = CardFilter(
        statuses=tuple(statuses or ()), kind=kind, text=text, min_confidence=min_confidence
    )
    return q.where(*card_filters(namespace, f))  # the console's list filters the same way


def get_card(
    *,
    session: Session,
    namespace: str,
    card_id: uuid.UUID,
    evidence_limit: int = 100,
    rules: EffectRules | None = None,
) -> CardPublic:
    """One card with (up to evidence_limit pieces of) its evidence."""
    card = session.get(Card, card_id)
    if card is None or card.namespace != namespace:
        raise NotFound(f"no card {card_id} in namespace {namespace!r}")
    ev = (
        session.execute(
            select(CardEvidence)
            .where(col(CardEvidence.card_id) == card_id)
            .order_by(col(CardEvidence.created_at), col(CardEvidence.id))  # the same page each time
            .limit(evidence_limit)
        )
        .scalars()
        .all()
    )
    tests = harms_tests(session.connection(), rules=rules or EffectRules(), namespaces=[namespace])
    public = to_public(card, ev, rules=rules, harms=tests.get(card_id))
    gate = session.get(CardBacktest, card_id)  # the serving gate's figures (memory_core.backtest)
    if gate is not None:
        public.backtest = gate.figures()
    return public


def example_state(*, session: Session, namespace: str) -> dict[str, Any] | None:
    """A task state taken from real evidence that the best-supported active card applies to."""
    card = session.execute(
        select(Card)
        .where(col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value)
        .order_by(col(Card.run_count).desc(), col(Card.evidence_count).desc(), col(Card.card_id))
        .limit(1)
    ).scalar_one_or_none()
    if card is None:
        return None
    ev = session.execute(
        select(CardEvidence).where(col(CardEvidence.card_id) == card.card_id).limit(1)
    ).scalar_one_or_none()
    if ev is None:
        return None
    wanted = set().union(*(compile_stored(p).variables for p in card.preconditions))
    return {k: v for k, v in ev.condition.items() if k in wanted}
