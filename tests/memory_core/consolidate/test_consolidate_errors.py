"""Consolidation merges warnings of the same error, never warnings of different errors."""

from __future__ import annotations

from memory_core.consolidate.stage import consolidate
from memory_core.settings import ConsolidateRules
from tests.memory_core.consolidate.test_consolidate import _card, _statuses

RULES = ConsolidateRules()


def _warning(engine, tool: str, error: str, *, evidence: int = 1):
    # worded as the rule extractor words a pre-call warning: one error per card
    return _card(
        engine,
        scenario=f'Calling {tool} can fail with "{error}"',
        pre=['task_type == "default"', f'tool == "{tool}"'],
        tools=[tool],
        evidence=evidence,
        modes=[error],
    )


def test_warnings_of_different_errors_before_the_same_call_stay_two_cards(engine):
    declined = _warning(engine, "pay", "card 4111 declined", evidence=2)
    funds = _warning(engine, "pay", "insufficient funds for order 77")
    # the same error twice: only the masked number differs
    expired = _warning(engine, "refund", "refund window of 30 days expired", evidence=2)
    again = _warning(engine, "refund", "Refund window of 45 days expired")
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    assert (report.merges, report.absorbed) == (1, 1)
    cards = _statuses(engine)
    for kept in (declined, funds):
        assert cards[kept].status == "active" and cards[kept].version == 1
        assert len(cards[kept].failure_modes) == 1 and cards[kept].evidence_count < 3
    assert cards[expired].status == "active" and cards[expired].evidence_count == 3
    # one error, listed once: the union keys failure modes on the error's signature
    assert len(cards[expired].failure_modes) == 1
    assert cards[again].status == "superseded" and cards[again].superseded_by == expired


SCENARIO = (
    "Paying a large order at checkout with the card saved on the customer's account fails; "
    "ask the customer for another way to pay before trying again"
)


def _alike(engine, tool: str, bound: int, error: str):
    # same tools and variables (one block), different preconditions (no structural merge),
    # the same words: only the word-overlap path can merge these
    return _card(
        engine,
        scenario=SCENARIO,
        pre=[f'tool == "{tool}"', f"amount > {bound}"],
        tools=[tool],
        modes=[error],
    )


def test_word_overlap_never_merges_warnings_of_different_errors(engine):
    declined = _alike(engine, "pay", 100, "card declined")
    down = _alike(engine, "pay", 200, "service unavailable")
    # a rewording of one error still merges by word overlap
    refused = _alike(engine, "charge", 100, "card declined")
    reworded = _alike(engine, "charge", 200, "the card was declined")
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    cards = _statuses(engine)
    assert (report.merges, report.absorbed) == (1, 1)
    assert cards[declined].status == cards[down].status == "active"
    assert {cards[refused].status, cards[reworded].status} == {"active", "superseded"}
    survivor = next(c for c in (cards[refused], cards[reworded]) if c.status == "active")
    assert sorted(m["mode"] for m in survivor.failure_modes) == [
        "card declined",
        "the card was declined",
    ]


def test_a_warning_and_a_card_without_errors_are_not_merged(engine):
    warn = _alike(engine, "pay", 100, "card declined")
    worked = _card(engine, scenario=SCENARIO, pre=['tool == "pay"', "amount > 200"], tools=["pay"])
    report = consolidate(engine=engine, namespace="ns", rules=RULES)
    cards = _statuses(engine)
    assert report.merges == 0
    assert cards[warn].status == cards[worked].status == "active"
