"""Temporal hints in a statement ("this week", "until Friday", "for now") and when they end."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from dateutil import parser as date_parser

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
HINT = re.compile(
    r"\b(?:(?P<open>for now|for the time being|for the moment|temporarily|at the moment)"
    r"|(?P<span>today|tonight|tomorrow|this week(?:end)?|this month|this year)"
    r"|until (?P<until>(?:next )?[A-Z][a-z]+(?: \d{1,2}(?:st|nd|rd|th)?)?(?:,? \d{4})?"
    r"|\d{4}-\d{2}-\d{2})"
    r"|for the (?:next|coming) (?P<n>\d+|a|an|one|two|three|four|five|six) ?"
    r"(?P<unit>day|week|month|year)s?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Span:
    """A temporal hint found in a statement: its text, and its end when a date is known."""

    text: str
    valid_until: datetime | None


def _end_of_day(d: datetime) -> datetime:
    return datetime.combine(d.date(), time(23, 59, 59), tzinfo=d.tzinfo)


def _until(word: str, said_at: datetime) -> datetime | None:
    w = word.lower().removeprefix("next ").strip()
    if w in _WEEKDAYS:
        ahead = (_WEEKDAYS.index(w) - said_at.weekday()) % 7 or 7
        return _end_of_day(said_at + timedelta(days=ahead))
    try:
        parsed: datetime = date_parser.parse(word, default=said_at.replace(tzinfo=None))
    except (ValueError, OverflowError):
        return None
    if not any(ch.isdigit() for ch in word):
        return None  # a bare word ("until Monday" aside) is not a date we can trust
    end = _end_of_day(parsed.replace(tzinfo=said_at.tzinfo))
    return end if end >= said_at else None


def _span(kind: str, said_at: datetime) -> datetime:
    k = kind.lower()
    if k in ("today", "tonight"):
        return _end_of_day(said_at)
    if k == "tomorrow":
        return _end_of_day(said_at + timedelta(days=1))
    if k.startswith("this week"):
        return _end_of_day(said_at + timedelta(days=6 - said_at.weekday()))
    if k == "this month":
        nxt = (said_at.replace(day=28) + timedelta(days=4)).replace(day=1)
        return _end_of_day(nxt - timedelta(days=1))
    return _end_of_day(said_at.replace(month=12, day=31))  # this year


def find_span(text: str, *, said_at: datetime | None) -> Span | None:
    """The first temporal hint in text; valid_until only when the statement's date is known."""
    m = HINT.search(text)
    if m is None:
        return None
    end: datetime | None = None
    if said_at is not None:
        if m["span"]:
            end = _span(m["span"], said_at)
        elif m["until"]:
            end = _until(m["until"], said_at)
        elif m["n"]:
            n = int(m["n"]) if m["n"].isdigit() else _NUMBERS[m["n"].lower()]
            end = _end_of_day(said_at + timedelta(days=n * _UNIT_DAYS[m["unit"].lower()]))
    return Span(text=m.group(0), valid_until=end)
