"""A retrospect worker process for the crash tests: the stage until nothing is pending
(rules, or the LLM when HINDSIGHT_LLM__BASE_URL is set).

EXTRACT_DELAY_S (test-only) makes each extraction that much slower: rule extraction takes
microseconds, so without it a worker could finish all the work between two looks of the
test and never be caught holding claims."""

from __future__ import annotations

import os
import time
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
    delay = float(os.environ.get("EXTRACT_DELAY_S", "0"))
    if delay:
        extract = extractor.extract

        def slow_extract(view):  # type: ignore[no-untyped-def]
            time.sleep(delay)
            return extract(view)

        extractor.extract = slow_extract  # type: ignore[method-assign]
    while retrospect_once(
        engine=engine,
        extractor=extractor,
        worker=worker,
        batch_size=settings.retrospect.batch_size,
        lease=timedelta(seconds=settings.retrospect.lease_seconds),
    ).claimed:
        pass


if __name__ == "__main__":
    main()
