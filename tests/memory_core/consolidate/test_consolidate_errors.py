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
    assert cards[again].status == "superseded" and cards[again].superseded_by == expired
