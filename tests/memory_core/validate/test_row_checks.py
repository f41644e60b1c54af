"""The suite's rules checked row by row (what the API, the MCP tool and review edits use)
agree with Great Expectations running the suite, on a corpus of good and bad cards."""

from __future__ import annotations

import json
import uuid

import pytest

from memory_core.validate.frame import DraftRow, cards_frame
from memory_core.validate.rows import check_cards, check_rows
from memory_core.validate.suite import MAX_ACTIONS, MAX_OUTCOME, MAX_SCENARIO, RULES, run_suite

REGISTRY = frozenset({"search", "book", "refund"})
SECRET = "sk-live0123456789abcdefXYZ"


def card(**kw) -> DraftRow:
    base = {
        "card_id": str(uuid.uuid4()),
        "scenario": "Before booking, check the seat map",
        "expected_outcome": "the seat is free",
        "actual_outcome": "",
        "confidence": 0.7,
        "action_sequence": json.dumps([{"tool": "search"}, {"tool": "book"}]),
        "preconditions": json.dumps(['tool == "book"']),
        "failure_modes": "[]",
    }
    return DraftRow(**{**base, **kw})


def corpus() -> list[DraftRow]:
    """Good cards and cards breaking each rule (some several at once), edges included."""
    same = str(uuid.uuid4())
    return [
        card(),
        card(confidence=0.0),
        card(confidence=1.0),
        card(scenario="x" * MAX_SCENARIO),
        card(expected_outcome="y" * MAX_OUTCOME, actual_outcome="z" * MAX_OUTCOME),
        card(action_sequence=json.dumps([{"tool": "search"}] * MAX_ACTIONS)),
        card(preconditions="[]"),
        card(scenario=None),
        card(scenario="   "),
        card(scenario="x" * (MAX_SCENARIO + 1)),
        card(expected_outcome="y" * (MAX_OUTCOME + 1)),
        card(actual_outcome="z" * (MAX_OUTCOME + 1)),
        card(confidence=None),
        card(confidence=1.01),
        card(confidence=-0.2),
        card(action_sequence="[]"),
        card(action_sequence="not json"),
        card(action_sequence=json.dumps([{"tool": "search"}] * (MAX_ACTIONS + 1))),
        card(action_sequence=json.dumps([{"tool": ""}, {"tool": "book"}])),
        card(action_sequence=json.dumps([{"note": "no tool"}])),
        card(action_sequence=json.dumps([{"tool": "teleport"}])),
        card(preconditions=json.dumps(["tool == "])),
        card(preconditions="{}"),
        card(
            failure_modes=json.dumps([{"mode": "auth", "handling": "sk-live0123456789abcdefXYZ"}])
        ),
        card(scenario=None, confidence=7.0, action_sequence="[]", preconditions="oops"),
        card(card_id=same),
        card(card_id=same, confidence=0.3),
    ]


@pytest.fixture(scope="module")
def cards():
    return corpus()  # each call draws new card ids


@pytest.fixture(scope="module")
def frame(cards):
    return cards_frame(cards, registry=REGISTRY)


def test_row_checks_agree_with_the_suite_on_the_whole_corpus(cards, frame) -> None:
    expected = run_suite(frame).failures
    got = check_rows(frame)
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expected.items()}
    # and on the plain columns a card written through the API is checked on (no frame)
    plain = check_cards(cards, registry=REGISTRY)
    assert {k: sorted(v) for k, v in plain.items()} == {k: sorted(v) for k, v in expected.items()}
    # the corpus breaks every rule, and passes some cards: the comparison is not vacuous
    assert {r for v in expected.values() for r in v} == {r.name for r in RULES}
    assert len(expected) < len(frame)


def test_row_checks_agree_with_the_suite_card_by_card() -> None:
    # every third card (the suite costs about a second a run); not the shared ids: uniqueness
    # is a batch's rule, one row is always unique
    for row in corpus()[:-2:3]:
        one = cards_frame([row], registry=REGISTRY)
        expected = run_suite(one).failures
        assert check_rows(one) == expected, row
        assert check_cards([row], registry=REGISTRY) == expected, row
