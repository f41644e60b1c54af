"""A tool's reminder's profile: the argument kinds all its errors came with (both databases)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlmodel import Session, col

from memory_core.cards.profile import PROFILE, profile_of, stored_profile, tool_scope
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardStatus
from memory_core.retention.evidence import REMOVED
from memory_core.screen.values import PLACEHOLDER
from tests.helpers.pipeline import retrospect_all

SEAT = "Error: no seat left in this cabin"
PAY = "Error: the payment was declined"
LATE = "Error: the booking window has closed"


def _run(run: str, task: str, calls: list[tuple[dict[str, Any], str]]) -> tuple[str, dict]:
    steps = [
        {"type": "tool_call", "tool": "book", "args": args, "observation": error}
        for args, error in calls
    ]
    return run, {"id": run, "task_id": task, "outcome": "failure", "steps": steps}


def runs() -> list[tuple[str, dict]]:
    """Two task groups: no seat comes with business bookings (three runs), a declined payment
    with economy ones (two); a closed window in one group only. No call of `book` succeeds,
    so no argument separates failures from successes: every warning is the tool's reminder."""
    out = []
    for task, n in (("a", 1), ("b", 2)):
        out.append(_run(f"{task}-seat", task, [({"cabin": "business", "user": f"user_{n}"}, SEAT)]))
        out.append(_run(f"{task}-pay", task, [({"cabin": "economy", "user": f"user_{n}"}, PAY)]))
    out.append(_run("b-seat2", "b", [({"cabin": "business", "user": "user_7"}, SEAT)]))
    out.append(_run("a-late", "a", [({"cabin": "economy", "user": "user_3"}, LATE)]))
    return out


def night(engine, records: list[tuple[str, dict]] | None = None) -> dict[str, Card]:
    """Ingest and retrospect the runs; the tool's reminders (served) by the error they name."""
    ingest(engine=engine, records=records or runs(), namespace="default", task_type="default")
    retrospect_all(engine)
    with Session(engine) as s:
        s.execute(update(Card).values(status=CardStatus.active.value))
        s.commit()
        cards = list(s.execute(select(Card).where(col(Card.preconditions) != [])).scalars())
    out = {}
    for c in cards:
        modes = " ".join(m["mode"] for m in c.failure_modes).casefold()
        for error in (SEAT, PAY, LATE):
            if error.split(": ")[1].casefold() in modes:
                out[error] = c
    return out


def test_a_night_gives_a_reminder_the_kinds_its_errors_came_with(engine) -> None:
    cards = night(engine)
    assert {tuple(c.preconditions) for c in cards.values()} == {('tool == "book"',)}
    seat = stored_profile(cards[SEAT].provenance)
    assert [p["expr"] for p in seat] == [
        'args.cabin == "business"',
        'args.user.matches("^user_[0-9]+$")',
    ]
    assert [p["text"] for p in seat] == ['cabin = "business"', "user is user_<digits>"]
    assert [p["expr"] for p in stored_profile(cards[PAY].provenance)] == [
        'args.cabin == "economy"',
        'args.user.matches("^user_[0-9]+$")',
    ]
    # one task group's calls share their features by chance: no profile
    assert PROFILE not in cards[LATE].provenance


def test_another_kind_of_call_narrows_the_profile(engine) -> None:
    night(engine)
    cards = night(engine, [_run("c-seat", "c", [({"cabin": "economy", "user": "user_9"}, SEAT)])])
    assert [p["expr"] for p in stored_profile(cards[SEAT].provenance)] == [
        'args.user.matches("^user_[0-9]+$")'
    ]
    assert len(stored_profile(cards[PAY].provenance)) == 2  # untouched


def test_no_withheld_or_redacted_value_enters_a_profile() -> None:
    calls = [
        ({"args": {"cabin": "economy", "note": PLACEHOLDER, "mail": "[REDACTED:email]"}}, "g1"),
        ({"args": {"cabin": "economy", "note": PLACEHOLDER, "mail": "[REDACTED:email]"}}, "g2"),
    ]
    assert profile_of(calls) == [{"expr": 'args.cabin == "economy"', "text": 'cabin = "economy"'}]
    assert profile_of(calls[:1]) == []  # one group
    # a run retention summarised keeps its argument names only: it tells no kind
    summarised = ({"args": {"cabin": REMOVED, "note": REMOVED}}, "g3")
    assert profile_of([*calls, summarised]) == profile_of(calls)
    assert profile_of([calls[0], summarised]) == []
    assert tool_scope(['tool == "book"']) and not tool_scope([])
    assert not tool_scope(['tool == "book"', 'args.cabin == "economy"'])
    poisoned = {PROFILE: [{"expr": f'args.note == "{PLACEHOLDER}"', "text": "x"}]}
    assert stored_profile(poisoned) == []
