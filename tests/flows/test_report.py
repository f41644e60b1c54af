"""The nightly summary's rows: what decay skipped and consolidation deferred, counted and
named: the night always finishes, and the operator sees what it left."""

from __future__ import annotations

import uuid

from flows.report import named_cards, summary_rows
from flows.summary import NightlySummary
from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.decay import DecayReport


def _ids(n: int) -> list[uuid.UUID]:
    return sorted(uuid.uuid4() for _ in range(n))


def test_the_summary_counts_and_names_the_cards_left_for_the_next_night() -> None:
    skipped, deferred = _ids(3), _ids(12)
    summary = NightlySummary(
        decay=DecayReport(decayed=5, skipped=3, skipped_ids=skipped),
        # the stage report names up to its cap: 14 deferred, 12 of them named
        consolidation=ConsolidateSummary(merges=2, deferred=14, deferred_ids=deferred),
    )
    rows = {r["metric"]: r["value"] for r in summary_rows(summary)}
    assert rows["cards decayed"] == 5 and rows["merges"] == 2
    assert rows["cards skipped by decay (changed meanwhile)"] == 3
    assert rows["skipped by decay, cards"] == ", ".join(str(i)[:8] for i in skipped)
    assert rows["merges / supersessions deferred (cards changed meanwhile)"] == 14
    assert rows["deferred, by survivor card"] == (
        ", ".join(str(i)[:8] for i in deferred[:10]) + " and 4 more"
    )


def test_a_night_that_left_nothing_says_so() -> None:
    rows = {r["metric"]: r["value"] for r in summary_rows(NightlySummary())}
    assert rows["cards skipped by decay (changed meanwhile)"] == 0
    assert rows["merges / supersessions deferred (cards changed meanwhile)"] == 0
    assert rows["skipped by decay, cards"] == rows["deferred, by survivor card"] == ""


def test_named_cards_counts_what_the_stage_did_not_name() -> None:
    assert named_cards([], 7) == "7 cards"
    [one] = _ids(1)
    assert named_cards([one], 1, shown=10) == str(one)[:8]


def test_namespaces_add_up_their_deferred_cards() -> None:
    a, b = _ids(1), _ids(2)
    total = ConsolidateSummary()
    total.add(ConsolidateSummary(namespaces=1, deferred=1, deferred_ids=a))
    total.add(ConsolidateSummary(namespaces=1, deferred=2, deferred_ids=b))
    assert total.deferred == 3 and total.deferred_ids == a + b
