"""A fact's standing: a claim (a speaker's word alone), corroborated, or written by an operator.

The stage decides a new statement's standing (memory_core/facts/corroborate.py); here a stored
claim said again is raised when the repeat brings more than its speaker's word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from memory_core.cards.draft_rows import card_snapshot
from memory_core.models.card import Card, CardVersion, FactStanding


@dataclass(frozen=True)
class Said:
    """Who stands behind a statement: its standing, speaker, subject and corroboration."""

    standing: FactStanding
    speaker: str | None = None
    subject: str | None = None
    corroboration: list[dict[str, Any]] = field(default_factory=list)


def corroborates(card: Card, said_by: Said) -> str | None:
    """Why a repeat of a stored claim makes it more than a claim; None when it does not."""
    if card.standing != FactStanding.claim.value:
        return None
    if said_by.standing is FactStanding.operator:
        return "written through a key: more than a speaker's word"
    if said_by.corroboration:
        seen = said_by.corroboration[0]
        return f"corroborated by a tool result ({seen.get('tool')}, step {seen.get('step')})"
    if said_by.speaker and card.speaker and said_by.speaker.lower() != card.speaker.lower():
        return f"corroborated: stated by {said_by.speaker} too (first by {card.speaker})"
    return None


def corroborate(
    session: Session, card: Card, said_by: Said, *, actor: str, reason: str, now: datetime
) -> None:
    """Raise a stored claim to corroborated (operator, when written through a key), with a
    history row saying why."""
    seen = said_by.corroboration or [{"by": "speaker", "speaker": said_by.speaker}]
    if said_by.standing is not FactStanding.operator:
        card.provenance = {
            **card.provenance,
            "corroboration": [*(card.provenance.get("corroboration") or []), *seen],
        }
    card.standing = (
        FactStanding.operator.value
        if said_by.standing is FactStanding.operator
        else FactStanding.corroborated.value
    )
    card.version += 1
    session.add(
        CardVersion(
            card_id=card.card_id,
            version=card.version,
            snapshot=card_snapshot(card.model_dump()),
            actor=actor,
            reason=reason,
            created_at=now,
        )
    )
