"""The use log is bounded: uses past the retention window go, the cards keep their counts."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select
from sqlmodel import Session

from memory_core.db import session_scope
from memory_core.decay.use_log import prune_use_log
from memory_core.models.card import Card, CardUse
from memory_core.models.columns import utcnow
from tests.helpers.serve import add_card


def _uses(engine, namespace: str | None = None) -> int:
    q = select(func.count()).select_from(CardUse)
    if namespace:
        q = q.where(CardUse.namespace == namespace)
    with Session(engine) as s:
        return s.execute(q).scalar_one()


def test_old_uses_are_pruned_and_the_counts_stay_on_the_card(engine) -> None:
    now = utcnow()
    cards = {ns: add_card(engine, namespace=ns, use_count=60) for ns in ("a", "b")}
    with session_scope(engine) as s:
        for ns, card in cards.items():
            for days in range(60):  # one use a day for 60 days
                s.add(
                    CardUse(
                        card_id=card.card_id,
                        namespace=ns,
                        used_at=now - timedelta(days=days, hours=1),
                    )
                )
    assert prune_use_log(engine=engine, retention_days=0) == 0  # 0 keeps everything
    assert prune_use_log(engine=engine, retention_days=30, namespace="a", now=now) == 30
    assert (_uses(engine, "a"), _uses(engine, "b")) == (30, 60)
    assert prune_use_log(engine=engine, retention_days=30, now=now) == 30
    assert prune_use_log(engine=engine, retention_days=30, now=now) == 0  # idempotent
    with Session(engine) as s:
        counts = s.execute(select(Card.use_count)).scalars().all()
    assert counts == [60, 60]
