"""A retrospect worker process for the crash test: runs the stage until nothing is pending."""

from __future__ import annotations

from datetime import timedelta

from memory_core import db
from memory_core.retrospect.claims import worker_id
from memory_core.retrospect.rule_extractor import RuleExtractor
from memory_core.retrospect.stage import retrospect_once
from memory_core.settings import Settings


def main() -> None:
    settings = Settings()
    engine = db.make_engine(settings)
    worker = worker_id()
    while retrospect_once(
        engine=engine,
        extractor=RuleExtractor(),
        worker=worker,
        batch_size=settings.retrospect_batch_size,
        lease=timedelta(seconds=settings.lease_seconds),
    ).claimed:
        pass


if __name__ == "__main__":
    main()
