"""The cards the nightly learns from the airline runs, against a dev set labelled by reading.

labelled_cards.json (beside this file) labels every card the rule path has made active on these runs
(useful / trivial / wrong, each with a reason), keyed by what stays the same across runs:
pattern, failure modes, preconditions and whether it gives a fix or only a caution
(bench/lessons_cards.py prints them). The nightly must make no card labelled wrong active,
keep learning the useful ones (in any live status: whether one is served is validation's
call), and keep the wrong share of the labelled active cards at most 10%.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.lessons_cards import active_cards
from memory_core.consolidate.stage import consolidate
from memory_core.ingest.store import ingest
from memory_core.settings import Settings
from memory_core.validate.stage import validate_drafts
from tests.helpers.data import tau_runs
from tests.helpers.pipeline import retrospect_all

LABELS = Path(__file__).parent / "labelled_cards.json"
MAX_WRONG_SHARE = 0.10


def _labels() -> dict[str, dict[str, object]]:
    rows = json.loads(LABELS.read_text())
    return {json.dumps(r["key"], ensure_ascii=False): r for r in rows}


def test_the_labelled_dev_set_reads_well() -> None:
    labels = _labels()
    assert {r["label"] for r in labels.values()} <= {"useful", "trivial", "wrong"}
    assert all(str(r["reason"]).strip() for r in labels.values())
    assert sum(r["label"] == "useful" for r in labels.values()) >= 3


def test_the_nightly_serves_no_card_labelled_wrong(engine) -> None:
    # the memory never sees the expected actions (`info`), as in production
    records = [
        (f"r{i}", {k: v for k, v in r.items() if k != "info"}) for i, r in enumerate(tau_runs())
    ]
    ingest(engine=engine, records=records, namespace="bench", task_type="default")
    retrospect_all(engine, batch_size=200)
    settings = Settings()
    validate_drafts(engine=engine, reports_dir=None, review_below=settings.review.below)
    consolidate(engine=engine, namespace="bench", rules=settings.consolidate)
    labels = _labels()
    active = active_cards(engine, "bench")
    live = active_cards(engine, "bench", statuses=("active", "review", "draft"))
    wrong = [c["scenario"] for c in active if labels.get(c["key"], {}).get("label") == "wrong"]
    assert not wrong, f"cards labelled wrong are active: {wrong}"
    learned = {c["key"] for c in live}
    lost = [r["scenario"] for k, r in labels.items() if r.get("learned") and k not in learned]
    assert not lost, f"useful cards no longer learned: {lost}"
    labelled = [labels[c["key"]] for c in active if c["key"] in labels]
    assert labelled, "no active card is labelled: label them (bench/lessons_cards.py)"
    share = sum(r["label"] == "wrong" for r in labelled) / len(labelled)
    assert share <= MAX_WRONG_SHARE
