"""Whom a run's statements are about: the person the run names, never the namespace's "user".

A named speaker ("Caroline") is their own subject. A speaker known only by a role ("user",
"customer") is the person the run names: an id in its metadata (`user_id`, `customer_id`,
...), else the id the run's tool calls pass for a person (the one passed most often), else an
id the person states ("my user id is ..."), else the full name they introduce themselves by
("I'm Ana Silva"). A run that names nobody keeps its statements to itself (`user@<run>`): two
anonymous runs are never taken for one person.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from memory_core.facts.rules import GENERIC_SPEAKERS, NOT_A_NAME
from memory_core.keywords import STOPWORDS
from memory_core.redact import has_secret

# argument and metadata names that identify the person a run serves, in any agent's tools
PERSON_ID = re.compile(
    r"(?i)^(?:user|customer|client|member|patient|person|contact|account|caller|guest|"
    r"subscriber|requester)[_-]?(?:id|name|number|no|handle)$|^username$"
)
_STATED = re.compile(
    r"(?i)\bmy (?:user|customer|client|member(?:ship)?|account|patient)[ -]?"
    r"(?:id|number|no\.?|name|handle)\s*(?:is|:)\s*(?P<id>[A-Za-z0-9][\w.@-]{2,63}?)"
    r"(?=[\s,;!?]|\.(?:\s|$)|$)"
)
# a person introducing themselves by their full name ("Hi, I'm Ana Silva"): two or three
# capitalised words, none a common word, so "I'm Happy to help", "I am in Paris" or "I'm
# Looking For It" name nobody
_INTRODUCED = re.compile(
    r"(?i:\b(?:my name is|my name's|i am|i'm|i’m|this is))\s+"
    r"(?P<name>[A-Z][a-z]+(?:[ -][A-Z][a-z'’]+){1,2})(?![\w'’-]| [A-Z])"
)
_MAX_TAG = 40


def _id(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    return text if 0 < len(text) <= 128 and "\n" not in text else None


def metadata_person(extra: Mapping[str, Any]) -> str | None:
    """The person id a run's metadata names (its first person-id field)."""
    for key, value in extra.items():
        if PERSON_ID.match(str(key)) and (found := _id(value)):
            return found
    return None


def called_person(steps: Iterable[Mapping[str, Any]]) -> str | None:
    """The id the run's tool calls pass for a person most often (ties: the first passed)."""
    seen: Counter[str] = Counter()
    for step in steps:
        args = step.get("args") if step.get("type") == "tool_call" else None
        for key, value in (args or {}).items():
            if PERSON_ID.match(str(key)) and (found := _id(value)):
                seen[found] += 1
    return seen.most_common(1)[0][0] if seen else None


def stated_person(texts: Iterable[str]) -> str | None:
    """An id a person states for themselves ("my customer id is c-123"), else the full name
    they introduce themselves by ("I'm Ana Silva")."""
    texts = list(texts)
    for text in texts:
        if m := _STATED.search(text):
            return m["id"]
    for text in texts:
        for m in _INTRODUCED.finditer(text):
            words = m["name"].replace("-", " ").split()
            if not (set(words) & NOT_A_NAME or {w.lower() for w in words} & STOPWORDS):
                return m["name"]
    return None


def run_tag(key: str) -> str:
    """A short, stable name of a run for the subject of its anonymous speakers; a key holding a
    credential is named by its hash (the subject is served with every fact)."""
    if len(key) <= _MAX_TAG and not has_secret(key):
        return key
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def is_generic(speaker: str) -> bool:
    """A speaker known only by a role ("user", "customer"), not by a name."""
    return speaker.strip().lower() in GENERIC_SPEAKERS


def run_person(
    *, key: str, extra: Mapping[str, Any], steps: Iterable[Mapping[str, Any]], said: Iterable[str]
) -> tuple[str, bool]:
    """(subject, named) of a run's role-only speaker: the person id it names, else the run's
    own anonymous person (named False)."""
    steps = list(steps)
    found = metadata_person(extra) or called_person(steps) or stated_person(said)
    return (found, True) if found else (f"user@{run_tag(key)}", False)
