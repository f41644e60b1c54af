"""What changed in the cards since a time: each card created, merged (into what), superseded,
archived, restored, sent to review or rejected, by whom and why, with the card's evidence
count (how many evidence rows it rests on now).

Read from the cards' version history (every writer records actor and reason there). The
validation stage moves a passing draft to active or review without a version of its own: that
decision is read from the card (a draft at its last version, now active or review, updated
since), with the validator as its actor.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.models.card import Card, CardKind, CardStatus, CardVersion
from memory_core.redact import redact


@dataclass(frozen=True)
class Change:
    """One change of one card."""

    at: datetime
    card_id: uuid.UUID
    namespace: str
    scenario: str
    what: str  # created, merged, absorbed, superseded, archived, restored, ...
    actor: str
    reason: str
    into: uuid.UUID | None = None  # merged into / superseded by
    evidence: int = 0  # the card's evidence rows now (what the decision rests on)


def _what(version: int, snapshot: dict[str, Any], reason: str) -> tuple[str, uuid.UUID | None]:
    """The kind of change a version row records, and the card it points to."""
    status = snapshot.get("status")
    by = snapshot.get("superseded_by")
    into = uuid.UUID(by) if isinstance(by, str) else None
    if version == 1:  # a draft refused on its way in is a rejection, not a new lesson
        refused = {CardStatus.rejected.value, CardStatus.quarantined.value}
        return (str(status) if status in refused else "created"), None
    if status == CardStatus.superseded.value:
        return ("merged" if reason.startswith("merged into") else "superseded"), into
    if snapshot.get("merged"):
        return "absorbed", None
    if reason.startswith("restored"):
        return "restored", None
    named = {
        CardStatus.archived.value: "archived",
        CardStatus.review.value: "sent to review",
        CardStatus.rejected.value: "rejected",
        CardStatus.quarantined.value: "quarantined",
        CardStatus.active.value: "activated",
    }
    return named.get(str(status), "changed"), None


def changes_since(
    *, engine: Engine, since: datetime, namespace: str | None = None, limit: int = 10000
) -> list[Change]:
    """Every change since `since` (UTC), oldest first, at most `limit`."""
    with Session(engine) as session:
        q = (
            select(CardVersion, col(Card.namespace), col(Card.scenario), col(Card.evidence_count))
            .join(Card, col(Card.card_id) == col(CardVersion.card_id))
            .where(col(CardVersion.created_at) >= since)
        )
        if namespace is not None:
            q = q.where(col(Card.namespace) == namespace)
        rows = session.execute(q.order_by(col(CardVersion.created_at)).limit(limit)).all()
        out = []
        for v, ns, scenario, evidence in rows:
            what, into = _what(v.version, v.snapshot or {}, v.reason)
            # redacted: the report becomes a Prefect artifact, a console page and CLI output
            text, why = redact(scenario), redact(v.reason)
            out.append(
                Change(v.created_at, v.card_id, ns, text, what, v.actor, why, into, evidence)
            )
        out += _validated(session, since, namespace, limit)
    out.sort(key=lambda c: (c.at, str(c.card_id)))
    return out[:limit]


def _validated(
    session: Session, since: datetime, namespace: str | None, limit: int
) -> list[Change]:
    """Drafts that validation moved to active or review since then (no version of their own:
    the card's last version is still the draft's)."""
    # the columns shown and the last version's status alone, in one read: whole rows and
    # whole snapshots of a night's thousands of cards made the Changes page take 0.4-0.8 s
    q = (
        select(
            col(Card.card_id),
            col(Card.status),
            col(Card.confidence),
            col(Card.updated_at),
            col(Card.namespace),
            col(Card.scenario),
            col(Card.evidence_count),
        )
        .join(
            CardVersion,
            and_(
                col(CardVersion.card_id) == col(Card.card_id),
                col(CardVersion.version) == col(Card.version),
            ),
        )
        .where(
            # every kind named: the list's (namespace, kind, updated_at) index reads the range
            col(Card.kind).in_([k.value for k in CardKind]),
            col(Card.updated_at) >= since,
            col(Card.status).in_([CardStatus.active.value, CardStatus.review.value]),
            # its last change has no version of its own (else it is listed already)
            col(CardVersion.snapshot)["status"].as_string() == CardStatus.draft.value,
        )
    )
    if namespace is not None:
        q = q.where(col(Card.namespace) == namespace)
    out = []
    for c in session.execute(q.limit(limit)).all():
        active = c.status == CardStatus.active.value
        reason = (
            f"passed validation (confidence {c.confidence:.2f})"
            if active
            else f"passed validation; confidence {c.confidence:.2f} is below the review threshold"
        )
        what = "activated" if active else "sent to review"
        out.append(
            Change(
                c.updated_at,
                c.card_id,
                c.namespace,
                redact(c.scenario),
                what,
                "validator",
                reason,
                evidence=c.evidence_count,
            )
        )
    return out
