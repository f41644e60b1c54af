"""The string values a namespace's states really take: what "a literal nobody uses" is
measured against when a key writes a card (memory_core.everywhere)."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import Session, col

from memory_core.cel_programs import STRING_LITERAL
from memory_core.models.card import LIVE_STATUSES, Card
from memory_core.models.trajectory import Trajectory
from memory_core.preconditions import normalise_text
from memory_core.screen.provenance import Origin, origin_of

MAX_CARDS = 5000  # the most recent learnt cards read for their literals


def known_values(session: Session, namespace: str) -> frozenset[str]:
    """Task types and agents of the namespace's runs, and the literals and tools of the cards
    learnt from them (an operator's own cards say nothing of what states take)."""
    found: set[str] = set()
    runs = session.execute(
        select(col(Trajectory.task_type), col(Trajectory.agent_id))
        .where(col(Trajectory.namespace) == namespace)
        .distinct()
    ).tuples()
    for task_type, agent_id in runs:
        found |= {v for v in (task_type, agent_id) if v}
    cards = session.execute(
        select(col(Card.preconditions), col(Card.action_sequence), col(Card.provenance))
        .where(col(Card.namespace) == namespace, col(Card.status).in_(LIVE_STATUSES))
        .order_by(col(Card.updated_at).desc())
        .limit(MAX_CARDS)
    ).tuples()
    for preconditions, actions, provenance in cards:
        if origin_of(provenance or {}) is Origin.operator:
            continue
        for p in preconditions or []:
            found |= {m.group("body") for m in STRING_LITERAL.finditer(str(p))}
        found |= {str(a["tool"]) for a in actions or [] if isinstance(a, dict) and a.get("tool")}
    return frozenset(normalise_text(v) for v in found)
