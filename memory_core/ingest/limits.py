"""Hard input edges: what no record, card, fact or query may hold, checked before any storage.

PostgreSQL refuses NUL in text and jsonb, UTF-8 cannot carry a lone surrogate, JSON has no
NaN or Infinity (a stored one breaks every later answer), deep nesting exhausts the stack,
and an unbounded field fills the database. Each is refused here with the record and the
field named, so the edge answers 400/422 and the good records of a batch still go in.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, Field, model_validator

from memory_core.errors import InvalidInput


class InputLimits(BaseModel):
    """Caps on what ingest and the API accept (HINDSIGHT_LIMITS__...)."""

    max_id_chars: int = Field(default=256, ge=16, le=256, description="trajectory ids")
    max_message_chars: int = Field(
        default=20_000, ge=100, description="longer messages are cut, with a marker"
    )
    max_metadata_bytes: int = Field(default=65_536, ge=256, description="metadata as JSON")
    max_field_chars: int = Field(default=200_000, ge=1000, description="any other string")
    max_json_depth: int = Field(default=64, ge=4, le=500, description="nesting of a record")
    max_observation_chars: int = Field(
        default=4000,
        ge=1,
        description="longer tool results are cut, with a marker (JSON ones stay valid JSON)",
    )
    max_expression_chars: int = Field(
        default=512, ge=16, description="a longer precondition is refused"
    )
    max_expression_depth: int = Field(
        default=8, ge=1, description="a precondition nested deeper is refused"
    )
    max_preconditions: int = Field(default=12, ge=1, description="preconditions per card")


DEFAULT_LIMITS = InputLimits()
MAX_PARAM_CHARS = 2048  # a query-string parameter


def text_problem(text: str) -> str | None:
    """Why a string cannot be stored (NUL, lone surrogate), or None when it can."""
    if "\x00" in text:
        return "holds a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (not valid Unicode)"
    return None


def printable(text: str) -> str:
    """The text with NUL and lone surrogates escaped: safe to echo back in an error."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\u0000")


def check_json(
    value: Any,
    *,
    record: str | None = None,
    field: str = "",
    limits: InputLimits = DEFAULT_LIMITS,
) -> None:
    """Refuse (InvalidInput naming the field) NUL, lone surrogates, NaN/Infinity, too deep
    nesting and too long strings anywhere in a JSON value. Iterative: depth is no danger."""
    # a node's path is a link to its parent's, spelled out only for an error: a large record
    # (200k items) is walked without building a string per node
    stack: list[tuple[Any, _Link, int]] = [(value, (None, field) if field else None, 0)]
    while stack:
        v, link, depth = stack.pop()
        if depth > limits.max_json_depth:
            raise InvalidInput(
                f"nested deeper than {limits.max_json_depth} levels",
                record=record,
                field=_spelled(link),
            )
        if isinstance(v, str):
            if (problem := _text_problem(v, limits)) is not None:
                raise InvalidInput(problem, record=record, field=_spelled(link) or None)
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise InvalidInput(
                    f"{v} is not a finite number (JSON has no NaN or Infinity)",
                    record=record,
                    field=_spelled(link),
                )
        elif isinstance(v, dict):
            for k, item in v.items():
                sub = (link, k)
                if (problem := _text_problem(str(k), limits)) is not None:
                    raise InvalidInput(problem, record=record, field=_spelled(sub))
                stack.append((item, sub, depth + 1))
        elif isinstance(v, list | tuple):
            stack.extend((item, (link, i), depth + 1) for i, item in enumerate(v))


_Link = tuple[Any, Any] | None  # (the parent's link, this node's key or index)


def _spelled(link: _Link) -> str:
    parts: list[str] = []
    while link is not None:
        link, key = link
        parts.append(printable(str(key)))
    return ".".join(reversed(parts))


def _text_problem(text: str, limits: InputLimits) -> str | None:
    # ASCII text holds no lone surrogate: only NUL to look for, without encoding a copy
    problem = ("\x00" in text and text_problem(text)) if text.isascii() else text_problem(text)
    if problem:
        return problem
    if len(text) > limits.max_field_chars:
        return f"{len(text)} characters, more than the {limits.max_field_chars} allowed"
    return None


def check_record(
    record: dict[str, Any], *, name: str, limits: InputLimits = DEFAULT_LIMITS
) -> None:
    """A raw trajectory record within the caps: clean JSON, a short id, bounded metadata."""
    check_json(record, record=name, limits=limits)
    for id_field in ("id", "trajectory_id", "run_id"):
        value = record.get(id_field)
        if value is not None and len(str(value)) > limits.max_id_chars:
            raise InvalidInput(
                f"{len(str(value))} characters, more than the {limits.max_id_chars} allowed",
                record=name,
                field=id_field,
            )
    metadata = record.get("metadata")
    if metadata is not None:
        size = len(json.dumps(metadata, default=str).encode())
        if size > limits.max_metadata_bytes:
            raise InvalidInput(
                f"{size} bytes, more than the {limits.max_metadata_bytes} allowed",
                record=name,
                field="metadata",
            )


def clean_query_text(value: str | None, *, field: str) -> str | None:
    """A query parameter that the database can compare (no NUL, no lone surrogate)."""
    if value is not None:
        problem = text_problem(value) or (
            f"{len(value)} characters, more than the {MAX_PARAM_CHARS} allowed"
            if len(value) > MAX_PARAM_CHARS
            else None
        )
        if problem:
            raise InvalidInput(problem, field=field)
    return value


class CleanInput(BaseModel):
    """A request model whose raw input passes `check_json` (422 naming the field otherwise)."""

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any) -> Any:
        try:
            check_json(data)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from exc
        return data
