"""A retrospect worker process for the crash tests: the stage until nothing is pending
(rules, or the LLM when HINDSIGHT_LLM_BASE_URL is set)."""

from __future__ import annotations

from datetime import timedelta

from memory_core import db
from memory_core.retrospect.claims import worker_id
from memory_core.retrospect.factory import build_extractor
from memory_core.retrospect.stage import retrospect_once
from memory_core.settings import Settings


def main() -> None:
    settings = Settings()
    engine = db.make_engine(settings)
    worker = worker_id()
    extractor = build_extractor(settings, engine)
    while retrospect_once(
        engine=engine,
        extractor=extractor,
        worker=worker,
        batch_size=settings.retrospect_batch_size,
        lease=timedelta(seconds=settings.lease_seconds),
    ).claimed:
        pass


if __name__ == "__main__":
    main()
