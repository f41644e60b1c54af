"""Rule-based fact extraction from people's messages (conversation turns, trajectory messages).

Explicit first-person statements only. A sentence that is a question, a hypothetical, a wish
or someone else's words yields nothing; a temporal hint ("this week", "until Friday") bounds
the fact when the statement's date is known.
"""

from __future__ import annotations

import re

from memory_core.facts.rules import QUOTES, RULES, Statement
from memory_core.facts.store import FactIn
from memory_core.facts.timespan import find_span

RULES_VERSION = "rules.v1"
_IGNORED_ROLES = {"assistant", "system", "developer", "tool", "function", "bot", "ai"}
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# a statement under a condition, a wish or someone else's words is not a fact
_HEDGE = re.compile(
    r"\b(?:if|when|whether|unless|would|could|should|wish|hope|maybe|might|imagine|pretend|"
    r"said|says|told|asked|thought|think|dream|dreamed|dreamt|someday|once)\b",
    re.IGNORECASE,
)


def is_person(role: str | None, speaker: str | None) -> bool:
    """Whether a message is a person's (not the agent's, a system prompt, or a tool's)."""
    return (role or "").lower() not in _IGNORED_ROLES and bool((speaker or role or "").strip())


def sentences(text: str) -> list[str]:
    """The declarative sentences of a message (questions dropped)."""
    parts = (p.strip().strip(QUOTES).strip() for p in _SENTENCE.split(text))
    return [p for p in parts if p and not p.endswith("?")]


def rule_facts(statement: Statement) -> list[FactIn]:
    """The facts a person's message states explicitly (often none)."""
    facts: dict[tuple[str, str | None], FactIn] = {}
    for sentence in sentences(statement.text):
        span = find_span(sentence, said_at=statement.said_at)
        # the rules read the sentence without its time hint ("I live in Denver [this week]")
        bare = " ".join(sentence.replace(span.text, " ").split()) if span else sentence
        for name, pattern, build in RULES:
            for m in pattern.finditer(bare):
                if _HEDGE.search(bare[: m.start()]):
                    continue
                for key, value, query, conf in build(m, statement):
                    fact = FactIn(
                        key=key,
                        value=value,
                        query=query,
                        valid_until=span.valid_until if span else None,
                        confidence=round(conf - (0.1 if span and not span.valid_until else 0.0), 2),
                        source={
                            **(statement.source or {}),
                            "rule": name,
                            "sentence": sentence[:300],
                            **({"temporary": span.text} if span else {}),
                            "said_at": statement.said_at.isoformat() if statement.said_at else None,
                            "extractor": RULES_VERSION,
                        },
                    )
                    facts[(fact.key, fact.query)] = fact  # the last statement in a message wins
    return list(facts.values())
