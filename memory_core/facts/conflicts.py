"""Conflicting claims: two live facts about the same key whose values compete.

Same key and query is a newer statement (the older one is superseded). Same key, another
query, and values that name the same kind of thing with another qualifier ("a Gold member",
"a silver member") are competing claims: both are kept, each names the other, and the newer
is preferred (search ranks the older lower and shows the conflict).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col

from memory_core.cards.draft_rows import card_snapshot
from memory_core.models.card import Card, CardKind, CardStatus, CardVersion

OLDER_WEIGHT = 0.5  # an older claim that a newer one contradicts keeps half its score
_ARTICLE = re.compile(r"^(?:a|an|the|my|our)\s+", re.I)


def _head(value: str) -> tuple[str, str]:
    """(head noun, the rest) of a short value: 'a Gold member' -> ('member', 'gold')."""
    words = _ARTICLE.sub("", value.strip()).lower().split()
    return (words[-1], " ".join(words[:-1])) if words else ("", "")


def compete(a: str, b: str) -> bool:
    """Two values name the same kind of thing, differently qualified."""
    (ha, ra), (hb, rb) = _head(a), _head(b)
    return bool(ha) and ha == hb and ra != rb and bool(ra or rb)


def conflicts_of(card: Card) -> list[str]:
    """Ids of the claims this fact conflicts with."""
    found = card.provenance.get("conflicts_with") or []
    return [str(x) for x in found]


def _link(session: Session, card: Card, other: uuid.UUID, now: datetime, reason: str) -> None:
    ids = sorted({*conflicts_of(card), str(other)})
    card.provenance = {**card.provenance, "conflicts_with": ids}
    card.version += 1
    card.updated_at = now
    session.add(card)
    session.add(
        CardVersion(
            card_id=card.card_id,
            version=card.version,
            snapshot=card_snapshot(card.model_dump()),
            actor="facts",
            reason=reason,
            created_at=now,
        )
    )


def mark_conflicts(session: Session, card: Card, *, now: datetime) -> list[uuid.UUID]:
    """Link a new fact with the live facts of its key that it contradicts; their ids."""
    if card.kind != CardKind.fact.value or not card.key or not card.value:
        return []
    rows = session.execute(
        select(Card).where(
            col(Card.namespace) == card.namespace,
            col(Card.kind) == CardKind.fact.value,
            col(Card.key) == card.key,
            col(Card.status) == CardStatus.active.value,
            col(Card.card_id) != card.card_id,
        )
    ).scalars()
    rivals = [r for r in rows if r.value and compete(r.value, card.value)]
    for r in rivals:
        _link(session, r, card.card_id, now, f"conflicting claim: {card.value!r} (newer)")
    if rivals:
        card.provenance = {
            **card.provenance,
            "conflicts_with": sorted(str(r.card_id) for r in rivals),
        }
        session.add(card)
    return [r.card_id for r in rivals]


def preference(card: Card, by_id: dict[uuid.UUID, Any]) -> float:
    """1.0, or OLDER_WEIGHT when a newer claim among by_id contradicts this one."""
    for other in conflicts_of(card):
        rival = by_id.get(uuid.UUID(other))
        if rival is not None and rival.created_at > card.created_at:
            return OLDER_WEIGHT
    return 1.0
