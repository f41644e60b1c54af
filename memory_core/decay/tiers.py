"""Time decay in SQL: the idle clock, the tier a card is due, the factor that brings it there."""

from __future__ import annotations

from datetime import datetime, timedelta
from math import prod
from typing import Any

from sqlalchemy import and_, case, func, literal
from sqlalchemy.sql.elements import ColumnElement

from memory_core.decay.sql import ts
from memory_core.models.card import Card
from memory_core.settings import DecayTier


def idle_since() -> ColumnElement[datetime]:
    """The decay clock: the last use, else creation; a restore from the archive restarts it."""
    c = Card.__table__.c  # type: ignore[attr-defined]
    base = func.coalesce(c.last_used_at, c.created_at)
    return case((c.restored_at > base, c.restored_at), else_=base)


def due_tier(clock: ColumnElement[Any], tiers: list[DecayTier], now: datetime) -> Any:
    """The deepest tier whose threshold the idle time has reached (0: none)."""
    whens = [
        (clock <= ts(now - timedelta(days=t.after_days)), literal(i + 1))
        for i, t in reversed(list(enumerate(tiers)))
    ]
    return case(*whens, else_=literal(0))


def tier_step(tiers: list[DecayTier], frm: Any, to: Any, pick: str) -> Any:
    """CASE over (tier applied, tier due): the combined factor, or the reason text."""
    whens = []
    for a in range(len(tiers)):
        for b in range(a + 1, len(tiers) + 1):
            factor = prod(t.factor for t in tiers[a:b])
            names = f"tier {b}" if b == a + 1 else f"tiers {a + 1}-{b}"
            value: Any = (
                literal(factor)
                if pick == "factor"
                else literal(
                    f"time decay: unused {tiers[b - 1].after_days:g}+ days, {names}, "
                    f"confidence x{factor:.4g}"
                )
            )
            whens.append((and_(frm == a, to == b), value))
    return case(*whens, else_=literal(1.0 if pick == "factor" else ""))
