"""The validate stage: drafts through the suite; active, review, or rejected with the reasons."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.writer import card_snapshot
from memory_core.db import session_scope
from memory_core.models.card import Card, CardStatus, CardVersion
from memory_core.models.columns import new_id, utcnow
from memory_core.models.validation import ValidationRun
from memory_core.validate.frame import CARD_COLUMNS, cards_frame
from memory_core.validate.regenerate import Regenerate
from memory_core.validate.suite import run_suite

_CHUNK = 5000


@dataclass
class ValidationReport:
    """What one validation run decided."""

    run_id: uuid.UUID | None = None
    evaluated: int = 0
    activated: int = 0
    review: int = 0
    rejected: int = 0
    rule_failures: dict[str, int] = field(default_factory=dict)
    docs_index: str | None = None


def _set_status(session: Session, ids: Sequence[uuid.UUID], status: CardStatus) -> None:
    for i in range(0, len(ids), _CHUNK):
        session.execute(
            update(Card)
            .where(
                col(Card.card_id).in_(ids[i : i + _CHUNK]),
                col(Card.status) == CardStatus.draft.value,
            )
            .values(status=status.value, updated_at=utcnow())
        )


def validate_drafts(
    *,
    engine: Engine,
    reports_dir: Path | None,
    namespace: str | None = None,
    registry: frozenset[str] | None = None,
    review_below: float = 0.5,
    regenerate: Regenerate | None = None,
) -> ValidationReport:
    """Validate every draft: failing ones rejected (with the failed expectations in their
    history), passing ones active, or in review when their confidence is below review_below."""
    with Session(engine) as session:
        q = select(*CARD_COLUMNS).where(col(Card.status) == CardStatus.draft.value)
        if namespace is not None:
            q = q.where(col(Card.namespace) == namespace)
        drafts: list[Any] = list(session.execute(q).all())
    if not drafts:
        return ValidationReport()
    run_id = new_id()
    docs = reports_dir / "validation" if reports_dir else None
    result = run_suite(cards_frame(drafts, registry=registry), docs_dir=docs)
    rejected = [c for c in drafts if str(c.card_id) in result.failures]
    passing = [c for c in drafts if str(c.card_id) not in result.failures]
    fixed = _regenerated(engine, rejected, result.failures, regenerate, registry)
    if fixed:
        rejected = [c for c in rejected if c.card_id not in fixed]
        passing += list(fixed.values())
    active = [c.card_id for c in passing if c.confidence >= review_below]
    review = [c.card_id for c in passing if c.confidence < review_below]
    now = utcnow()
    with session_scope(engine) as session:
        for card in fixed.values():  # the regenerated fields replace the failing ones
            card.version += 1
            session.merge(card)
            session.add(
                CardVersion(
                    card_id=card.card_id,
                    version=card.version,
                    snapshot=card_snapshot(card.model_dump()),
                    actor="validator",
                    reason="regenerated after failing: "
                    + "; ".join(result.failures[str(card.card_id)]),
                )
            )
        _set_status(session, active, CardStatus.active)
        _set_status(session, review, CardStatus.review)
        _set_status(session, [c.card_id for c in rejected], CardStatus.rejected)
        if rejected:
            session.execute(
                update(Card), [{"card_id": c.card_id, "version": c.version + 1} for c in rejected]
            )
            session.execute(
                insert(CardVersion),
                [
                    {
                        "id": new_id(),
                        "card_id": c.card_id,
                        "version": c.version + 1,
                        "snapshot": {
                            "status": CardStatus.rejected.value,
                            "failed": result.failures[str(c.card_id)],
                        },
                        "reason": "rejected by validation: "
                        + "; ".join(result.failures[str(c.card_id)]),
                        "actor": "validator",
                        "created_at": now,
                    }
                    for c in rejected
                ],
            )
        session.add(
            ValidationRun(
                id=run_id,
                namespace=namespace,
                created_at=now,
                evaluated=len(drafts),
                activated=len(active),
                review=len(review),
                rejected=len(rejected),
                rule_failures=result.rule_failures,
                failed_cards={cid: rules for cid, rules in result.failures.items()},
                docs_path=str(result.docs_index) if result.docs_index else None,
            )
        )
    return ValidationReport(
        run_id=run_id,
        evaluated=len(drafts),
        activated=len(active),
        review=len(review),
        rejected=len(rejected),
        rule_failures=result.rule_failures,
        docs_index=str(result.docs_index) if result.docs_index else None,
    )


def _regenerated(
    engine: Engine,
    rejected: list[Any],
    failures: dict[str, list[str]],
    regenerate: Regenerate | None,
    registry: frozenset[str] | None,
) -> dict[uuid.UUID, Card]:
    """LLM drafts that failed get one regeneration; those whose new version passes."""
    if regenerate is None:
        return {}
    ids = [
        r.card_id
        for r in rejected
        if r.provenance.get("producer") == "llm" and not r.provenance.get("regenerated")
    ]
    if not ids:
        return {}
    with Session(engine) as session:
        cards = list(session.execute(select(Card).where(col(Card.card_id).in_(ids))).scalars())
    candidates = []
    for card in cards:
        changes = regenerate(card, failures[str(card.card_id)])
        if changes is not None:
            candidates.append(Card.model_validate({**card.model_dump(), **changes}))
    if not candidates:
        return {}
    second = run_suite(cards_frame(candidates, registry=registry))
    return {c.card_id: c for c in candidates if str(c.card_id) not in second.failures}


def latest_run(*, engine: Engine) -> ValidationRun | None:
    """The most recent validation run, if any."""
    with Session(engine) as session:
        return session.execute(
            select(ValidationRun).order_by(col(ValidationRun.created_at).desc()).limit(1)
        ).scalar_one_or_none()
