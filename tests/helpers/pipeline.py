"""Running the stages directly (no Prefect) for tests and benchmarks."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from memory_core.models.card import Card
from memory_core.models.drafts import Extractor
from memory_core.retrospect.claims import worker_id
from memory_core.retrospect.rule_extractor import RuleExtractor
from memory_core.retrospect.stage import retrospect_once
from memory_core.retrospect.summary import BatchResult


def retrospect_all(
    engine: Engine,
    *,
    batch_size: int = 50,
    lease_s: float = 60.0,
    extractor: Extractor | None = None,
) -> BatchResult:
    """Retrospect until nothing is pending (rules unless told otherwise); the summed result."""
    total, worker = BatchResult(), worker_id()
    while True:
        b = retrospect_once(
            engine=engine,
            extractor=extractor or RuleExtractor(),
            worker=worker,
            batch_size=batch_size,
            lease=timedelta(seconds=lease_s),
        )
        if not b.claimed:
            return total
        total.add(b)


def card_fingerprint(engine: Engine) -> dict[str, tuple[str, int, float]]:
    """signature -> (status, evidence_count, confidence), to compare two runs."""
    with Session(engine) as s:
        return {
            c.signature: (c.status, c.evidence_count, round(c.confidence, 6))
            for c in s.execute(select(Card)).scalars()
        }
