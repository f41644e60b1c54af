"""Fact rules on single statements: each rule, what they refuse, and time hints."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core.facts.extract import rule_facts
from memory_core.facts.rules import Statement

SAID = datetime(2024, 5, 8, 13, 0, tzinfo=UTC)  # a Wednesday


def _facts(text: str, speaker: str = "Ann", said_at: datetime | None = SAID):
    return {
        (f.key, f.value): f
        for f in rule_facts(Statement(speaker=speaker, text=text, said_at=said_at))
    }


@pytest.mark.parametrize(
    "text,key,value",
    [
        ("I prefer dark mode.", "Ann.prefers.dark_mode", "dark mode"),
        ("I really prefer tea over coffee.", "Ann.prefers.coffee_or_tea", "tea"),
        ("I prefer Vim for editing.", "Ann.preferred_editing", "Vim"),
        ("My favourite book is Dune.", "Ann.favourite_book", "Dune"),
        ("my favorite color is blue!", "Ann.favourite_color", "blue"),
        ("We use MySQL.", "Ann.group.uses.mysql", "yes (MySQL)"),
        ("We use PostgreSQL, not MySQL.", "Ann.group.uses.mysql", "no (PostgreSQL instead)"),
        (
            "We switched from Jenkins to GitHub Actions.",
            "Ann.group.uses.jenkins",
            "no (GitHub Actions instead)",
        ),
        ("We no longer use Jira.", "Ann.group.uses.jira", "no"),
        ("I'm a nurse.", "Ann.is_a.nurse", "a nurse"),
        ("I am an architect and a dad.", "Ann.is_a.architect", "an architect"),
        (
            "I'm a big fan of Nintendo games.",
            "Ann.likes.nintendo_games",
            "yes, a fan of Nintendo games",
        ),
        ("I live in Boston with my wife.", "Ann.lives_in", "Boston"),
        ("I just moved to Denver.", "Ann.lives_in", "Denver"),
        ("I work at Acme Corp as a designer.", "Ann.works_at", "Acme Corp"),
        ("I work as a nurse at night.", "Ann.works_as", "a nurse"),
        ("Please call me Annie.", "Ann.preferred_name", "Annie"),
        ("My name is Ann Lee.", "Ann.name", "Ann Lee"),
        (
            "Remember that my flight is on the 12th.",
            "Ann.note.my_flight_is_on",
            "my flight is on the 12th",
        ),
        (
            "From now on, answer in French please.",
            "Ann.from_now_on.answer_in_french_please",
            "answer in French please",
        ),
    ],
)
def test_each_rule_on_a_plain_statement(text, key, value) -> None:
    found = _facts(text)
    assert (key, value) in found, found.keys()
    fact = found[(key, value)]
    assert fact.query and fact.query.endswith("?")
    assert fact.source["sentence"] and fact.source["extractor"] == "rules.v1"


@pytest.mark.parametrize(
    "text",
    [
        "Do you live in Boston?",
        "If I lived in Paris I'd be happy.",
        "I wish I worked at Google.",
        "She said I prefer tea.",
        "I'm a bit tired today.",
        "I'm a huge fan of it!",
        "I live in the moment.",
        "I work at night.",
        "Call me tomorrow.",
        "Call me later!",
        "we use the park a lot",
        "We use it every day.",
        "My favorite part was the ending.",
        "Remember that time we went camping?",
        "Remember that progress takes time.",
        "I love my cat.",
        "What's your favourite movie?",
        "I prefer flights departing after 8am and before 9pm.",
        "I prefer flights within that time frame.",
        "I prefer to use a gift card for the payment instead.",
        "I'm using my Gold membership for this.",
    ],
)
def test_no_fact_from_questions_hypotheticals_or_vague_values(text) -> None:
    assert _facts(text) == {}


def test_temporal_hints_set_valid_until_only_with_a_date() -> None:
    (week,) = _facts("I live in Denver this week.").values()
    assert week.value == "Denver" and week.valid_until == datetime(
        2024, 5, 12, 23, 59, 59, tzinfo=UTC
    )
    (friday,) = _facts("I live in Denver until Friday.").values()
    assert friday.valid_until == datetime(2024, 5, 10, 23, 59, 59, tzinfo=UTC)
    (now,) = _facts("For now I live in Denver.").values()
    assert now.valid_until is None and now.source["temporary"] == "For now"
    (undated,) = _facts("I live in Denver this week.", said_at=None).values()
    assert undated.valid_until is None and undated.confidence < week.confidence
