"""The rules of fact extraction: one clear English phrasing each, with its guard.

Keys are normalised by the subject ("<subject>.lives_in": a named speaker, or the person the
run names for a speaker known by role only, see memory_core/facts/subject.py). Single-valued
relations keep one query, so a newer statement supersedes an older one; many-valued ones
("uses X", "a fan of X") carry the value in the key, so they never replace each other; an
identity is keyed by its kind ("is_a.member"), so "a Gold member" replaces "a silver member".
A value must look like what it claims to be (a place, an organisation or a product is
capitalised) or the rule stays silent: a wrong fact is worse than a missing one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

_CUT = re.compile(
    r"\s+(?:and|but|because|so|since|which|who|where|when|while|though|although|with|for|"
    r"after|before|if|until|as|at|in|on|like|now|too|anymore|these days|right now|lol|haha)"
    r"\b.*|\s*[-–—]+(?:\s.*|$)",
    re.IGNORECASE,
)
_QUALIFIER = re.compile(
    r"(?i)\s+(?:with|for|after|before|until|as|at|in|on|like|which|who|where|when|while)\b"
)
_OWNED = re.compile(r"(?i)(?:my|our|your|his|her|their)\b")
_ANAPHORA = re.compile(r"(?i)\b(?:that|this|those|these|it|them|such)\b")
QUOTES = "\"'“”‘’`*"
_VAGUE = {"part", "thing", "things", "moment", "moments", "memory", "one", "ones", "bit", "kind"}
_NOT_A_NOUN = {
    "bit", "little", "lot", "tad", "big", "huge", "total", "complete", "real", "true", "great",
    "good", "bad", "quick", "slow", "fan", "mess", "wreck", "sucker", "believer", "firm",
    "strong", "bundle", "kind", "sort", "part", "fool", "pro", "natural", "lucky", "proud",
    "nervous", "hot", "few", "couple", "whole", "way", "long", "mix",
}  # fmt: skip
NOT_A_NAME = {
    "I", "Me", "My", "It", "This", "That", "The", "A", "An", "Later", "Soon", "Tomorrow",
    "Today", "Tonight", "Anytime", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
    "Saturday", "Sunday", "Crazy", "Maybe", "Please", "Back",
}  # fmt: skip
_PRONOUNS = {"it", "that", "this", "them", "those", "these", "him", "her", "yours", "you", "all"}
GENERIC_SPEAKERS = {"user", "human", "customer", "client"}
Found = list[tuple[str, str, str | None, float]]  # (key, value, query, confidence)


@dataclass(frozen=True)
class Statement:
    """One message of a person, with where it came from."""

    speaker: str
    text: str
    said_at: datetime | None = None
    source: dict[str, Any] | None = None
    # whom "I" means: the speaker's name, or for a role ("user") the person the run names;
    # anonymous when the run names nobody (the subject is then the run's own person)
    subject: str | None = None
    anonymous: bool = False

    @property
    def about(self) -> str:
        """The subject a first-person statement is about (the key's first part)."""
        return self.subject or self.speaker

    @property
    def label(self) -> str:
        """How a query names the subject ("the user" for an anonymous role)."""
        if self.speaker.lower() not in GENERIC_SPEAKERS:
            return self.speaker
        return self.subject if self.subject and not self.anonymous else f"the {self.speaker}"


def slug(text: str, *, words: int = 5) -> str:
    """Key-safe words: lower case, letters and digits, at most `words` of them."""
    return "_".join(re.findall(r"[a-z0-9]+", text.lower())[:words])


def clean(value: str, *, max_words: int = 6, whole: bool = False) -> str | None:
    """A value cut at its clause boundary; None when nothing crisp is left: too long, pointing
    back into the conversation ("that time frame"), or (whole=True) losing a qualifier that
    changes its meaning ("flights departing | after 8am")."""
    cut = _CUT.search(value)
    if whole and cut and _QUALIFIER.match(cut.group(0)):
        return None
    value = value[: cut.start()] if cut else value
    value = value.strip().strip(QUOTES).strip()
    words = value.split()
    if not words or len(words) > max_words or _ANAPHORA.search(value):
        return None
    return " ".join(words)


def _named(value: str) -> bool:
    """Looks like a name, place, organisation or product: a capital, a digit or a symbol."""
    return any(
        (w[0].isupper() and w not in NOT_A_NAME) or any(c.isdigit() for c in w) or "." in w[1:]
        for w in value.split()
    )


Builder = Callable[[re.Match[str], "Statement"], Found]


def _prefer(m: re.Match[str], st: Statement) -> Found:
    raw, s, who = m["x"], st.about, st.label
    pair = re.split(
        r"\s+(?:over|rather than|instead of)\s+|(?<=\w)\s+to\s+(?!\w+ing\b)", raw, maxsplit=1
    )
    if len(pair) == 2:
        x, y = clean(pair[0], max_words=4), clean(pair[1], max_words=4, whole=True)
        if not x or not y:
            return []
        a, b = sorted((x, y), key=str.lower)
        return [
            (f"{s}.prefers.{slug(a)}_or_{slug(b)}", x, f"Which does {who} prefer: {a} or {b}?", 0.8)
        ]
    if re.match(r"(?i)to\s", raw):
        return []  # "I prefer to use a gift card": a choice in this conversation, not a taste
    target = re.split(r"\s+for\s+", raw, maxsplit=1)
    x = clean(target[0], max_words=5, whole=len(target) == 1)
    if not x:
        return []
    if len(target) == 2 and (thing := clean(target[1], max_words=2, whole=True)):
        return [(f"{s}.preferred_{slug(thing)}", x, f"What does {who} prefer for {thing}?", 0.8)]
    return [(f"{s}.prefers.{slug(x)}", x, f"What does {who} prefer?", 0.75)]


def _favourite(m: re.Match[str], st: Statement) -> Found:
    thing, x = m["thing"].lower(), clean(m["x"], max_words=6)
    if not x or thing.split()[0] in _VAGUE or re.match(r"(?i)(?:when|that|how|to see)\b", x):
        return []
    return [
        (
            f"{st.about}.favourite_{slug(thing)}",
            x,
            f"What is {st.label}'s favourite {thing}?",
            0.8,
        )
    ]


def _fan(m: re.Match[str], st: Statement) -> Found:
    x = clean(re.sub(r"(?i)^both\s+", "", m["x"]), max_words=4)
    if not x or x.split()[0].lower() in _PRONOUNS:
        return []
    return [
        (f"{st.about}.likes.{slug(x)}", f"yes, a fan of {x}", f"Does {st.label} like {x}?", 0.75)
    ]


def _group(st: Statement, subj: str) -> tuple[str, str]:
    if subj.lower() == "i":
        return st.about, st.label
    # "we": the subject's group, never a namespace-wide team one person's word would define
    return f"{st.about}.group", f"{st.label}'s group"


def _uses(subject: str, who: str, thing: str, value: str) -> tuple[str, str, str | None, float]:
    return (f"{subject}.uses.{slug(thing)}", value, f"Does {who} use {thing}?", 0.8)


def _use(m: re.Match[str], st: Statement) -> Found:
    subject, who = _group(st, m["subj"] or m["subj_"])
    x = clean(m["x"], max_words=3)
    if not x or not _named(x) or _OWNED.match(x):
        return []  # "I'm using my Gold membership": a thing of theirs, not a tool they use
    out = [_uses(subject, who, x, f"yes ({x})")]
    if m["y"]:
        y = clean(m["y"], max_words=3)
        if not y or not _named(y):
            return []
        out = [
            _uses(subject, who, y, f"no ({x} instead)"),
            _uses(subject, who, x, f"yes ({x}, not {y})"),
        ]
    return out


def _stopped(m: re.Match[str], st: Statement) -> Found:
    subject, who = _group(st, m["subj"])
    y = clean(m["y"], max_words=3)
    return [_uses(subject, who, y, "no")] if y and _named(y) else []


def _switched(m: re.Match[str], st: Statement) -> Found:
    subject, who = _group(st, m["subj"])
    x, y = clean(m["x"], max_words=3), clean(m["y"], max_words=3)
    if not x or not y or not _named(x) or not _named(y):
        return []
    return [
        _uses(subject, who, y, f"no ({x} instead)"),
        _uses(subject, who, x, f"yes ({x}, not {y})"),
    ]


def _identity(m: re.Match[str], st: Statement) -> Found:
    x = clean(m["x"], max_words=4)
    if not x or x.split()[0].lower() in _NOT_A_NOUN or x.split()[-1].lower() in {"of", "to", "in"}:
        return []
    value, head = f"{m['art'].lower()} {x}", x.split()[-1]
    # one value per kind ("member"): "a Gold member" and "a silver member" compete, by time;
    # "a nurse" and "a mother" do not
    key = f"{st.about}.is_a.{slug(head)}"
    return [(key, value, f"What kind of {head.lower()} is {st.label}?", 0.75)]


def _lives(m: re.Match[str], st: Statement) -> Found:
    x = clean(m["x"], max_words=5)
    if not x or not _named(x):
        return []
    conf = 0.7 if m["verb"].lower().startswith("moved") else 0.8
    return [(f"{st.about}.lives_in", x, f"Where does {st.label} live?", conf)]


def _works(m: re.Match[str], st: Statement) -> Found:
    prep, x = m["prep"].lower(), clean(m["x"], max_words=5)
    if not x:
        return []
    if prep == "as":
        if not re.match(r"(?i)an? \w", x):
            return []
        return [(f"{st.about}.works_as", x, f"What does {st.label} work as?", 0.8)]
    if not _named(x) and not re.match(r"(?i)(?:a|an|the) \w", x):
        return []
    return [(f"{st.about}.works_at", x, f"Where does {st.label} work?", 0.8)]


def _called(m: re.Match[str], st: Statement) -> Found:
    name = m["x"]
    if any(w in NOT_A_NAME for w in name.split()):
        return []
    if m["how"].lower().startswith("my name"):
        return [(f"{st.about}.name", name, f"What is {st.label}'s name?", 0.85)]
    return [(f"{st.about}.preferred_name", name, f"What does {st.label} want to be called?", 0.85)]


def _remember(m: re.Match[str], st: Statement) -> Found:
    x = m["x"].strip().rstrip(".!").strip()
    if len(x.split()) < 3 or re.match(r"(?i)(?:you|we|when|how|what|the time|that time)\b", x):
        return []
    if not _named(x) and not re.search(r"(?i)\b(?:my|our|I|me|us)\b", x):
        return []  # advice ("remember that progress takes time") has no concrete referent
    return [
        (f"{st.about}.note.{slug(x, words=4)}", x, f"What did {st.label} ask to remember?", 0.75)
    ]


def _from_now(m: re.Match[str], st: Statement) -> Found:
    x = m["x"].strip().rstrip(".!").strip()
    if len(x.split()) < 3:
        return []
    key = f"{st.about}.from_now_on.{slug(x, words=4)}"
    return [(key, x, f"What did {st.label} ask for from now on?", 0.75)]


_X = r"(?P<x>[^,.;!?()]+)"
_Y = r"(?P<y>[^,.;!?()]+)"
_ADV = (
    r"(?:(?:really|much|usually|generally|definitely|always|currently|now|still|mostly|mainly"
    r"|only) )?"
)
_NAME = r"(?P<x>[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,2})"
_PATTERNS: dict[str, str] = {
    "prefer": rf"(?i)\bI {_ADV}prefer {_X}",
    "favourite": (
        r"(?i)\bmy (?:all-time )?(?:favou?rite|fave) (?P<thing>[a-z]+(?: [a-z]+){0,2}) "
        rf"(?:is|are|has to be) {_X}"
    ),
    "use": (
        rf"(?i)\b(?:(?P<subj>we|I) {_ADV}(?:use|rely on)|(?P<subj_>we)(?:'re| are) {_ADV}using) "
        r"(?P<x>[^,.;!?()]+?)(?:,? (?:and )?(?:not|instead of|rather than) "
        r"(?P<y>[^,.;!?()]+))?(?=[,.;!?()]|$)"
    ),
    "stopped": (
        r"(?i)\b(?P<subj>we|I) (?:don't|do not|no longer|never|(?:have |'ve )?stopped) "
        rf"us(?:e|ing) {_Y}"
    ),
    "switched": (
        r"(?i)\b(?P<subj>we|I)(?: have|'ve)? (?:switched|moved|migrated|changed) (?:over )?"
        r"from (?P<y>[^,.;!?()]+?) to " + _X
    ),
    "fan": rf"(?i)\bI(?:'m| am) (?:a |an )?(?:big |huge |great |massive )?fan of {_X}",
    "identity": rf"(?i)\bI(?:'m| am) (?P<art>an?) {_X}",
    "lives": rf"(?i)\bI {_ADV}(?P<verb>live in|(?:'m|am) living in|(?:just )?moved to) {_X}",
    "works": rf"(?i)\bI(?:'m| am)? {_ADV}work(?:ing)? (?P<prep>at|for|as) {_X}",
    "called": rf"(?P<how>(?i:\b(?:please )?call me|\bmy name is|\bI go by)) {_NAME}",
    "remember": (
        r"(?i)^(?:also,? |and )?(?:please )?(?:remember|note|keep in mind)(?: that|:) (?P<x>.+)$"
    ),
    "from_now_on": r"(?i)\bfrom now on,? (?P<x>[^.!?]+)",
}
_BUILDERS: dict[str, Builder] = {
    "prefer": _prefer,
    "favourite": _favourite,
    "use": _use,
    "stopped": _stopped,
    "switched": _switched,
    "fan": _fan,
    "identity": _identity,
    "lives": _lives,
    "works": _works,
    "called": _called,
    "remember": _remember,
    "from_now_on": _from_now,
}
# compiled once, at import
RULES: list[tuple[str, re.Pattern[str], Builder]] = [
    (name, re.compile(p), _BUILDERS[name]) for name, p in _PATTERNS.items()
]
