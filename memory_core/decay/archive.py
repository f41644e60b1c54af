"""The archive: cold cards out of retrieval, kept for audit, restorable with their history."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.draft_rows import card_snapshot
from memory_core.db import session_scope
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.card import LIVE_STATUSES, Card, CardArchive, CardStatus, CardVersion
from memory_core.models.columns import utcnow


class ArchiveEntry(BaseModel):
    """One archived card: why and when it left, and what it was."""

    card_id: uuid.UUID
    namespace: str
    reason: str
    detail: str
    confidence: float
    score: float | None
    archived_at: datetime
    restored_at: datetime | None
    restored_by: str | None
    scenario: str
    last_used_at: datetime | None
    use_count: int


def list_archive(
    *,
    engine: Engine,
    namespace: str,
    include_restored: bool = False,
    limit: int = 100,
    offset: int = 0,
) -> list[ArchiveEntry]:
    """Archived cards of a namespace, most recently archived first."""
    q = (
        select(
            CardArchive,
            col(Card.scenario),
            col(Card.last_used_at),
            col(Card.use_count),
        )
        .join(Card, col(Card.card_id) == col(CardArchive.card_id))
        .where(col(CardArchive.namespace) == namespace)
    )
    if not include_restored:
        q = q.where(col(CardArchive.restored_at).is_(None))
    q = q.order_by(col(CardArchive.archived_at).desc(), col(CardArchive.card_id))
    with Session(engine) as session:
        rows = session.execute(q.offset(offset).limit(limit)).all()
    return [
        ArchiveEntry(
            **a.model_dump(exclude={"id", "run_id"}),
            scenario=scenario,
            last_used_at=last_used_at,
            use_count=use_count,
        )
        for a, scenario, last_used_at, use_count in rows
    ]


def restore(
    *,
    engine: Engine,
    namespace: str,
    card_id: uuid.UUID,
    actor: str,
    now: datetime | None = None,
) -> Card:
    """Bring an archived card back to active; its idle clock and decay tier start afresh
    (else the next decay run would archive it again) and its history gains the restore."""
    now = now or utcnow()
    with session_scope(engine) as session:
        card = session.get(Card, card_id, with_for_update=True)
        if card is None or card.namespace != namespace:
            raise NotFound(f"no card {card_id} in namespace {namespace!r}")
        if card.status != CardStatus.archived.value:
            raise InvalidInput(f"card {card_id} is {card.status}, not archived", field="card_id")
        twin = session.execute(
            select(col(Card.card_id)).where(
                col(Card.namespace) == namespace,
                col(Card.signature) == card.signature,
                col(Card.status).in_(LIVE_STATUSES),
            )
        ).scalar_one_or_none()
        if twin is not None:
            raise InvalidInput(
                f"card {twin} already holds the same lesson ({card.signature[:12]}); "
                "restoring would make two live copies",
                field="card_id",
            )
        entry = session.execute(
            select(CardArchive)
            .where(col(CardArchive.card_id) == card_id, col(CardArchive.restored_at).is_(None))
            .order_by(col(CardArchive.archived_at).desc())
            .limit(1)
        ).scalar_one_or_none()
        why = f" (archived {entry.archived_at:%Y-%m-%d}: {entry.detail})" if entry else ""
        if entry is not None:
            entry.restored_at = now
            entry.restored_by = actor
            session.add(entry)
        card.status = CardStatus.active.value
        card.decay_tier = 0
        card.restored_at = now
        card.updated_at = now
        card.version += 1
        session.add(card)
        session.add(
            CardVersion(
                card_id=card.card_id,
                version=card.version,
                snapshot=card_snapshot(card.model_dump()),
                reason="restored from the archive" + why,
                actor=actor,
                created_at=now,
            )
        )
        return card
