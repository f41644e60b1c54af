"""A tool's reminder of an error counts every occurrence, keyed or not (both databases)."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import Session

from memory_core.ingest.store import ingest
from memory_core.models.card import Card
from tests.helpers.pipeline import retrospect_all

ERROR = "Error: gift card balance is not enough"


def _task(task: str, n: int) -> list[tuple[str, dict[str, object]]]:
    """Two trials of a task: one pays with a gift card, fails, and succeeds by credit card."""

    def call(pay: str, error: str | None) -> dict[str, object]:
        return {"type": "tool_call", "tool": "pay_order", "args": {"pay": pay},
                "observation": error or "ok"}  # fmt: skip

    failed = [call(f"gift_card_{n}", ERROR), call(f"credit_card_{n}", None)]
    ok = [call(f"credit_card_{n}", None)]
    return [
        (f"{task}-{i}", {"id": f"{task}-{i}", "task_id": task, "outcome": "success", "steps": s})
        for i, s in enumerate((failed, ok))
    ]


def test_the_reminder_counts_the_occurrences_a_keyed_warning_holds(engine) -> None:
    # the first night has one task: no key generalises, the warning is the tool's reminder;
    # the second night's task makes the gift card a key, and its occurrence counts for both
    for task, n in (("a", 1), ("b", 2)):
        ingest(engine=engine, records=_task(task, n), namespace="default", task_type="default")
        retrospect_all(engine)
    with Session(engine) as s:
        cards = [c for c in s.execute(select(Card)).scalars() if c.failure_modes]
    warnings = {
        tuple(c.preconditions): c for c in cards if c.provenance["pattern"] == "pre_call_warning"
    }
    reminder = warnings[('tool == "pay_order"',)]
    keyed = warnings[('tool == "pay_order"', 'args.pay.matches("^gift_card_[0-9]+$")')]
    assert (reminder.evidence_count, reminder.run_count) == (2, 2)
    assert (keyed.evidence_count, keyed.run_count) == (1, 1)
