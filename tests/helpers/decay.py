"""Cards and runs for the decay tests: rows idle a given number of days before a frozen clock."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, insert, select
from sqlmodel import Session

from memory_core.decay import DecayParams, run_decay
from memory_core.models.card import Card, CardArchive, CardVersion
from memory_core.settings import RankingWeights

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
W = RankingWeights()


def card_row(idle_days: float | None = None, **kw) -> dict:
    """An active card created (and unused) idle_days before NOW."""
    at = NOW - timedelta(days=idle_days if idle_days is not None else 1)
    base = {
        "card_id": uuid.uuid4(),
        "namespace": "default",
        "kind": "experience",
        "scenario": f"idle {idle_days}",
        "preconditions": [],
        "action_sequence": [{"tool": "q", "params_template": {}, "note": ""}],
        "expected_outcome": "ok",
        "actual_outcome": "ok",
        "failure_modes": [],
        "confidence": 0.8,
        "status": "active",
        "signature": uuid.uuid4().hex,
        "provenance": {},
        "evidence_count": 1,
        "created_at": at,
        "updated_at": at,
        "use_count": 0,
        "success_count": 0,
        "failure_count": 0,
        "consecutive_failures": 0,
        "version": 1,
    }
    base.update(kw)
    return base


def insert_cards(engine, rows: list[dict]) -> list[uuid.UUID]:
    with Session(engine) as s:
        s.execute(insert(Card), rows)
        s.commit()
    return [r["card_id"] for r in rows]


def cards_by_id(engine) -> dict[uuid.UUID, Card]:
    with Session(engine) as s:
        return {c.card_id: c for c in s.execute(select(Card)).scalars()}


def dump_state(engine) -> tuple:
    """Everything the stage could write, for before/after comparisons."""
    with Session(engine) as s:
        cards = sorted(
            (str(c.card_id), c.status, c.confidence, c.decay_tier, c.version, c.updated_at)
            for c in s.execute(select(Card)).scalars()
        )
        versions = s.execute(select(func.count()).select_from(CardVersion)).scalar_one()
        archived = s.execute(select(func.count()).select_from(CardArchive)).scalar_one()
    return cards, versions, archived


def decay_params(**kw) -> DecayParams:
    return DecayParams(now=NOW, **kw)


def decay_at(engine, namespace=None, **kw):
    return run_decay(engine=engine, params=decay_params(**kw), weights=W, namespace=namespace)


def arms(served: int, served_ok: int, withheld: int, withheld_ok: int) -> dict:
    """Card columns for outcomes in each holdout arm (served, withheld), used at NOW."""
    return {
        "served_outcomes": served,
        "served_successes": served_ok,
        "withheld_outcomes": withheld,
        "withheld_successes": withheld_ok,
        "use_count": served,
        "last_used_at": NOW,
    }
