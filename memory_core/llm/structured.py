"""Ask for JSON, parse it into a pydantic model: local repair first, then one repair prompt."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

from memory_core.errors import LLMAnswerRejected, LLMOutputInvalid
from memory_core.llm.client import LLMClient, LLMReply

M = TypeVar("M", bound=BaseModel)

# versioned like the stage prompts; the one repair prompt any structured answer may get
REPAIR_PROMPT = (Path(__file__).parent / "prompts" / "repair.v1.md").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Structured(Generic[M]):
    """A parsed answer with the replies it took (one, or two after a repair prompt)."""

    value: M
    replies: list[LLMReply]
    repaired_locally: bool


def parse_answer(text: str, schema: type[M]) -> tuple[M, bool]:
    """Parse text into schema; returns (value, repaired). Raises ValueError naming the problem."""
    repaired = False
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = json_repair.loads(text)
        repaired = True
        if data in ("", None) or not isinstance(data, (dict, list)):
            raise ValueError("the answer is not JSON") from None
    if isinstance(data, list) and len(schema.model_fields) == 1:
        # a bare list for a one-field wrapper ({"cards": [...]}) is a common, harmless slip
        data = {next(iter(schema.model_fields)): data}
        repaired = True
    try:
        return schema.model_validate(data), repaired
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ValueError(f"field {where}: {first['msg']}") from exc


class _WrongContent(ValueError):
    """The answer parsed, but `check` found it unusable."""


def _parse(text: str, schema: type[M], check: Callable[[M], object] | None) -> tuple[M, bool]:
    value, repaired = parse_answer(text, schema)
    if check is not None:
        try:
            check(value)  # raises ValueError naming what the answer got wrong
        except ValueError as exc:
            raise _WrongContent(str(exc)) from exc
    return value, repaired


def ask(
    *,
    llm: LLMClient,
    messages: list[dict[str, str]],
    schema: type[M],
    check: Callable[[M], object] | None = None,
) -> Structured[M]:
    """One call, parsed; if it does not parse, one repair prompt; then LLMOutputInvalid.

    `check` (optional) looks at a parsed answer and raises ValueError when it is unusable
    (say, it cites a turn it was not shown): that gets the same one repair prompt, and a
    second answer that parses but still fails it raises LLMAnswerRejected (a rejection)."""
    first = llm.complete(messages=messages, schema=schema)
    try:
        value, repaired = _parse(first.text, schema, check)
        return Structured(value, [first], repaired)
    except ValueError as problem:
        repair = [
            *messages,
            {"role": "assistant", "content": first.text[:4000]},
            {
                "role": "user",
                "content": REPAIR_PROMPT.format(
                    problem=problem, schema=json.dumps(schema.model_json_schema())
                ),
            },
        ]
    second = llm.complete(messages=repair, schema=schema)
    try:
        value, _ = _parse(second.text, schema, check)
        return Structured(value, [first, second], True)
    except _WrongContent as problem:  # well-formed and wrong twice: asking again is no cure
        raise LLMAnswerRejected(
            f"{llm.model} answered twice with what its check refused: {problem}",
            raw=second.text[:2000],
        ) from problem
    except ValueError as problem:
        raise LLMOutputInvalid(
            f"{llm.model} answered invalid JSON twice: {problem}", raw=second.text[:2000]
        ) from problem
