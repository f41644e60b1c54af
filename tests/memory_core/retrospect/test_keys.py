"""Keys that generalise, and no placeholder in a lesson (pure functions, no database)."""

from __future__ import annotations

import copy
import uuid
from dataclasses import replace
from typing import Any

from memory_core.cards.draft_rows import rank_draft
from memory_core.models.card import ActionStep, EvidenceTriple, FailureMode
from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.models.trajectory import Outcome, Step
from memory_core.retrospect.call_features import atoms, keyable
from memory_core.retrospect.keys import generalise_warnings, table_of
from memory_core.retrospect.placeholders import without_placeholders
from memory_core.screen.values import PLACEHOLDER

ERR = "Error: seat limit reached"


def _run(outcome: str, calls: list[tuple[dict[str, Any], str | None]]) -> TrajectoryView:
    steps = [
        Step(index=i, type="tool_call", tool="book", args=args, error=error,
             observation=error or "ok")
        for i, (args, error) in enumerate(calls)
    ]  # fmt: skip
    return TrajectoryView(uuid.uuid4(), "ns", "default", None, Outcome(outcome), steps)


def _atom(args: dict[str, Any], kind: str):
    [a] = [a for a in atoms(args) if a.kind == kind]
    return a


def _warning(args: dict[str, Any]) -> DraftCard:
    """A warning of the book tool's error drafted with every keyable feature of its call."""
    return DraftCard(
        pattern="pre_call_warning",
        scenario="s",
        preconditions=['tool == "book"', *(a.expr for a in atoms(args) if keyable(a))],
        action_sequence=[ActionStep(tool="book")],
        expected_outcome="",
        actual_outcome="",
        failure_modes=[FailureMode(mode="seat limit reached")],
        confidence=0.5,
        evidence=[EvidenceTriple(
            trajectory_id=uuid.uuid4(), step=0, condition={},
            action={"tool": "book", "args": args},
            result={"error_signature": "seat limit reached"})],
    )  # fmt: skip


def test_sizes_signs_codes_and_dates_are_never_keys() -> None:
    args = {"legs": [1, 2], "n": 3, "code": "ABC123", "day": "2024-05-01"}
    found = [a for a in atoms(args) if a.kind != "key"]
    assert {a.kind for a in found} == {"size", "sign", "pattern"} and len(found) == 4
    assert not any(keyable(a) for a in found)
    assert keyable(_atom({"pay": "gift_card_12"}, "pattern"))
    assert keyable(_atom({"cabin": "business"}, "word"))
    assert not [a for a in atoms({"q": PLACEHOLDER, "r": "[REDACTED:token]", "s": "<n>"})]


def test_a_feature_keys_a_warning_only_when_it_separates_across_tasks() -> None:
    def task(cabin_bad: str, pay_bad: str, pay_ok: str) -> list[TrajectoryView]:
        bad = {"cabin": cabin_bad, "pay": pay_bad}
        ok = {"cabin": cabin_bad, "pay": pay_ok}
        return [_run("success", [(bad, ERR), (ok, None)]), _run("success", [(ok, None)])]

    # two tasks: the retry dropped the gift card each time, the cabin stayed
    runs = [(v, "t1") for v in task("business", "gift_card_1", "credit_card_1")]
    runs += [(v, "t2") for v in task("economy", "gift_card_2", "credit_card_2")]
    table = table_of(runs)
    gift = _atom({"pay": "gift_card_1"}, "pattern")
    assert table.separates("book", gift, signature="seat limit reached")
    # the same in one task only: no key
    one = table_of(runs[:2])
    assert not one.separates("book", gift, signature="seat limit reached")
    # one identifier seen again in two tasks is not a kind of identifier
    same = table_of([(v, g) for v, g in ((task("x", "gift_card_1", "c_1")[0], "t1"),
                                         (task("x", "gift_card_1", "c_1")[0], "t2"))])  # fmt: skip
    assert not same.separates("book", gift, signature="seat limit reached")
    # a warning drafted with candidate keys keeps only the one that separates
    draft = _warning({"cabin": "business", "pay": "gift_card_1"})
    assert draft.preconditions == ['tool == "book"', 'args.cabin == "business"',
                                   'args.pay.matches("^gift_card_[0-9]+$")']  # fmt: skip
    generalise_warnings([draft], table)
    assert draft.preconditions == ['tool == "book"', 'args.pay.matches("^gift_card_[0-9]+$")']
    generalise_warnings([draft], one)
    assert draft.preconditions == ['tool == "book"']
    # a run that never recovered drafts no candidate, yet made the call other tasks' retries
    # showed to be the cause: its warning takes that key and joins the keyed card
    unrecovered = replace(draft, preconditions=['tool == "book"'], evidence=list(draft.evidence))
    generalise_warnings([unrecovered], table)
    assert unrecovered.preconditions == ['tool == "book"', 'args.pay.matches("^gift_card_[0-9]+$")']
    paid_by_card = replace(unrecovered, preconditions=['tool == "book"'], evidence=[
        draft.evidence[0].model_copy(update={"action": {"tool": "book", "args": {"pay": "cc_1"}}})
    ])  # fmt: skip
    generalise_warnings([paid_by_card], table)
    assert paid_by_card.preconditions == ['tool == "book"']


def test_a_draft_that_shows_a_fix_sets_the_cards_content() -> None:
    """Drafts of one lesson: the one from a run that recovered and succeeded is the card's
    content, whatever its stated confidence or the order the drafts came in."""

    def draft(outcome: str, fixed: bool, confidence: float) -> DraftCard:
        succeeded = {"tool": "book", "args": {"pay": "cc_1"}, "changed": []} if fixed else None
        return DraftCard(
            pattern="pre_call_warning", scenario="s", preconditions=['tool == "book"'],
            action_sequence=[ActionStep(tool="book", note="fixed" if fixed else "caution")],
            expected_outcome="", actual_outcome="", failure_modes=[FailureMode(mode="x")],
            confidence=confidence,
            evidence=[EvidenceTriple(
                trajectory_id=uuid.uuid4(), step=0, condition={}, action={"tool": "book"},
                result={"succeeded_with": succeeded, "outcome": outcome})],
        )  # fmt: skip

    caution = draft("failure", False, 0.9)
    retried_in_a_failed_run = draft("failure", True, 0.8)
    fix = draft("success", True, 0.5)
    for order in ([caution, retried_in_a_failed_run, fix], [fix, caution, retried_in_a_failed_run]):
        assert min(order, key=rank_draft) is fix
    assert min([caution, retried_in_a_failed_run], key=rank_draft) is caution


def test_no_placeholder_keys_a_lesson_or_shows_in_a_step() -> None:
    def draft(pattern: str, pre: str) -> DraftCard:
        return DraftCard(
            pattern=pattern, scenario="s", preconditions=['tool == "find"', pre],
            action_sequence=[ActionStep(tool="find", params_template={"q": PLACEHOLDER},
                                        note=f"query: {PLACEHOLDER}")],
            expected_outcome="", actual_outcome="", failure_modes=[], confidence=0.5,
            evidence=[],
        )  # fmt: skip

    withheld = f"args.q == {PLACEHOLDER!r}".replace("'", '"')
    kept = without_placeholders(
        [
            draft("pre_call_warning", withheld),
            draft("contrast_caution", withheld),
            draft("contrast_caution", 'args.q == "<n>"'),
            draft("contrast_caution", 'args.q == "[REDACTED:password]"'),
            draft("error_recovery", 'last_error == "total is <n>"'),  # a signature, kept
        ]
    )
    assert [d.pattern for d in kept] == ["pre_call_warning", "error_recovery"]
    assert kept[0].preconditions == ['tool == "find"']
    assert kept[1].preconditions == ['tool == "find"', 'last_error == "total is <n>"']
    for d in kept:
        text = str(d.preconditions) + str([s.model_dump() for s in d.action_sequence])
        assert "withheld" not in text


def test_a_keyed_warning_also_supports_the_tools_reminder_of_its_error() -> None:
    runs = []
    for g, n in (("t1", 1), ("t2", 2)):
        bad, ok = {"pay": f"gift_card_{n}"}, {"pay": f"credit_card_{n}"}
        runs += [(_run("success", [(bad, ERR), (ok, None)]), g), (_run("success", [(ok, None)]), g)]
    draft = _warning({"pay": "gift_card_1"})
    drafts = [draft]
    generalise_warnings(drafts, table_of(runs))
    keyed, reminder = drafts
    assert keyed.preconditions == ['tool == "book"', 'args.pay.matches("^gift_card_[0-9]+$")']
    assert reminder.preconditions == ['tool == "book"']
    assert reminder.evidence == keyed.evidence and reminder.evidence is not keyed.evidence
    assert reminder.failure_modes == keyed.failure_modes
    # the reminder is the card an unkeyed warning of the same error merges with
    generalise_warnings(unkeyed := [copy.deepcopy(draft)], table_of(runs[:2]))
    assert [d.signature for d in unkeyed] == [reminder.signature]
