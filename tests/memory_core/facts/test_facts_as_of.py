"""Facts as of a date: a scripted history of writes, supersessions, expiry and a forget, asked
at moments between them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memory_core.errors import InvalidInput
from memory_core.facts.as_of import parse_as_of
from memory_core.facts.search import search_facts
from memory_core.facts.store import FactIn, forget_fact, write_fact

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NS = "team-a"


def _day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def _values(engine, text: str, at: datetime | None) -> list[str]:
    hits = search_facts(engine=engine, namespace=NS, text=text, top_k=10, as_of=at)
    return sorted(h.fact.value or "" for h in hits)


def test_as_of_answers_what_was_true_then(engine) -> None:
    def write(key: str, value: str, day: float, **kw) -> str:
        card = write_fact(
            engine=engine,
            namespace=NS,
            fact=FactIn(key=key, value=value, **kw),
            actor="t",
            now=_day(day),
        )
        return str(card.card_id)

    write("deploy region", "Paris datacenter", 1)
    write("deploy region", "Berlin datacenter", 10)  # supersedes Paris on day 10
    write("editor", "vim editor", 2)
    editor_id = write("editor", "vim editor", 2)  # said again: the same fact
    write("release freeze", "freeze until launch", 3, valid_until=_day(8))
    history = {
        0: {"deploy": [], "editor": [], "freeze": []},
        5: {
            "deploy": ["Paris datacenter"],
            "editor": ["vim editor"],
            "freeze": ["freeze until launch"],
        },
        9: {"deploy": ["Paris datacenter"], "editor": ["vim editor"], "freeze": []},
        15: {"deploy": ["Berlin datacenter"], "editor": ["vim editor"], "freeze": []},
    }
    for day, expected in history.items():
        got = {
            "deploy": _values(engine, "deploy region datacenter", _day(day)),
            "editor": _values(engine, "editor", _day(day)),
            "freeze": _values(engine, "release freeze", _day(day)),
        }
        assert got == expected, day

    forget_fact(engine=engine, namespace=NS, fact_id=uuid.UUID(editor_id), actor="t")
    assert _values(engine, "editor", None) == []  # forgotten now
    assert _values(engine, "editor", _day(15)) == ["vim editor"]  # but held then
    assert _values(engine, "editor", datetime.now(UTC) + timedelta(seconds=5)) == []
    assert _values(engine, "deploy region datacenter", None) == ["Berlin datacenter"]


def test_an_as_of_that_is_not_a_date_is_refused() -> None:
    assert parse_as_of("2026-03-01") == datetime(2026, 3, 1, tzinfo=UTC)
    assert parse_as_of("2026-03-01T10:00+02:00") == datetime(2026, 3, 1, 8, tzinfo=UTC)
    with pytest.raises(InvalidInput, match="not an ISO date"):
        parse_as_of("last tuesday")
