"""LLM fact extraction: a versioned prompt, answers parsed into a model, cached in the database.

The conversation goes to the model in chunks of turns, each turn tagged with a reference;
every fact must name the turn it came from. An answer that does not parse, or that cites a
turn it was not shown, gets one repair prompt; if that is still unusable the answer is invalid
as a whole (LLMOutputInvalid): nothing of it is written, and the stage parks the run's LLM
part as a dead letter.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.engine import Engine

from memory_core.facts.rules import GENERIC_SPEAKERS, Statement
from memory_core.facts.store import FactIn
from memory_core.llm.cache import AnswerCache, SQLAnswerCache, cache_key
from memory_core.llm.client import LLMClient
from memory_core.llm.structured import ask
from memory_core.retrospect.factory import build_llm
from memory_core.settings import Settings

PROMPT_FILE = Path(__file__).parent / "prompts" / "facts.v1.md"
PROMPT_ID = "facts.v1"
MAX_TURN_CHARS = 1000


class LLMFact(BaseModel):
    """One durable fact as the model states it."""

    subject: str = Field(min_length=1, max_length=100)
    attribute: str = Field(min_length=1, max_length=100)
    value: str = Field(min_length=1, max_length=500)
    question: str = Field(min_length=3, max_length=300)
    turn: str = Field(min_length=1, max_length=64)
    valid_until: datetime | None = None
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)


class LLMFacts(BaseModel):
    """The model's whole answer for one chunk of turns."""

    facts: list[LLMFact]


_SELF = {"i", "me", "speaker", "the speaker", *GENERIC_SPEAKERS}
_SELF |= {f"the {g}" for g in GENERIC_SPEAKERS}
_GROUP = {"team", "we", "us", "the team", "our team"}


def subject_of(named: str, st: Statement) -> str:
    """The model's subject as a key's first part: the speaker themselves (a role: the person the
    run names), their group for "team", or another person it named."""
    low = named.strip().lower()
    if low in _SELF or low == st.speaker.lower():
        return st.about
    if low in _GROUP:
        return f"{st.about}.group"
    return named.strip()


@cache
def facts_prompt() -> str:
    """The system prompt (read once)."""
    return PROMPT_FILE.read_text(encoding="utf-8")


@dataclass
class LLMResult:
    """Facts found, each with the index of the statement it came from, and what it cost."""

    facts: list[tuple[int, FactIn]] = field(default_factory=list)
    calls: int = 0
    cached: int = 0


def _ref(st: Statement, index: int) -> str:
    turn = (st.source or {}).get("turn_id")
    return str(turn) if turn else f"t{index}"


def render(statements: list[Statement], start: int) -> tuple[str, dict[str, int]]:
    """The chunk as the model sees it, and the turn references it may cite."""
    lines, refs = [], {}
    for i, st in enumerate(statements, start=start):
        ref = _ref(st, i)
        refs[ref] = i
        day = f" ({st.said_at.date().isoformat()})" if st.said_at else ""
        text = " ".join(st.text.split())[:MAX_TURN_CHARS]
        lines.append(f"[{ref}]{day} {st.speaker}: {text}")
    return "\n".join(lines), refs


class LLMFactExtractor:
    """Facts from a trajectory's statements through any OpenAI-compatible model."""

    version = PROMPT_ID

    def __init__(self, *, llm: LLMClient, cache: AnswerCache, chunk_turns: int = 40) -> None:
        self.llm = llm
        self.cache = cache
        self.chunk_turns = chunk_turns

    def _facts(
        self, answer: LLMFacts, refs: dict[str, int], statements: list[Statement]
    ) -> list[tuple[int, FactIn]]:
        """The answer's facts, each with its statement; ValueError naming the first problem
        (a turn it was not shown, a fact the store cannot hold)."""
        out = []
        for f in answer.facts:
            ref = f.turn.strip("[] ")
            if ref not in refs:
                raise ValueError(f"fact {f.subject}.{f.attribute} cites turn {f.turn!r}, not shown")
            idx = refs[ref]
            st = statements[idx]
            until = f.valid_until
            if until is not None and until.tzinfo is None:
                until = until.replace(tzinfo=UTC)
            subject = subject_of(f.subject, st)
            try:
                fact = FactIn(
                    key=f"{subject}.{f.attribute}",
                    value=f.value,
                    query=f.question,
                    valid_until=until,
                    confidence=f.confidence,
                    source={
                        **(st.source or {}),
                        "said_at": st.said_at.isoformat() if st.said_at else None,
                        "sentence": st.text[:300],
                        "extractor": f"llm:{PROMPT_ID}",
                        "subject": subject,
                        "model": self.llm.model,
                    },
                )
            except ValidationError as exc:
                raise ValueError(
                    f"fact {f.subject}.{f.attribute} is unusable: {exc.errors()[0]['msg']}"
                ) from exc
            out.append((idx, fact))
        return out

    def _chunk(
        self,
        trajectory_id: uuid.UUID,
        text: str,
        refs: dict[str, int],
        statements: list[Statement],
        result: LLMResult,
    ) -> list[tuple[int, FactIn]]:
        messages = [
            {"role": "system", "content": facts_prompt()},
            {"role": "user", "content": f"Conversation:\n{text}"},
        ]
        key = cache_key(model=self.llm.model, prompt_id=PROMPT_ID, messages=messages)
        hit = self.cache.get(key)
        if hit is not None:
            try:
                found = self._facts(LLMFacts.model_validate(hit), refs, statements)
                result.cached += 1
                return found
            except (ValueError, ValidationError):
                pass  # cached before answers were checked whole: ask again
        # an answer that does not parse, or cites a turn it was not shown, gets one repair
        # prompt (as in retrospection); still unusable: LLMOutputInvalid, and nothing is kept
        answer = ask(
            llm=self.llm,
            messages=messages,
            schema=LLMFacts,
            check=lambda a: self._facts(a, refs, statements),
        )
        result.calls += len(answer.replies)
        self.cache.put(
            key=key,
            trajectory_id=trajectory_id,
            prompt_id=PROMPT_ID,
            model=self.llm.model,
            answer=answer.value.model_dump(mode="json"),
            prompt_tokens=sum(r.prompt_tokens for r in answer.replies),
            completion_tokens=sum(r.completion_tokens for r in answer.replies),
            calls=len(answer.replies),
        )
        return self._facts(answer.value, refs, statements)

    def extract(self, *, trajectory_id: uuid.UUID, statements: list[Statement]) -> LLMResult:
        """Every chunk's facts; LLMOutputInvalid if any answer is invalid (nothing is kept)."""
        result = LLMResult()
        for start in range(0, len(statements), self.chunk_turns):
            text, refs = render(statements[start : start + self.chunk_turns], start)
            result.facts += self._chunk(trajectory_id, text, refs, statements, result)
        return result


def build_fact_extractor(settings: Settings, engine: Engine) -> LLMFactExtractor | None:
    """The LLM fact extractor when HINDSIGHT_LLM__BASE_URL is set, else None (rules only)."""
    llm = build_llm(settings)
    return None if llm is None else LLMFactExtractor(llm=llm, cache=SQLAnswerCache(engine))
