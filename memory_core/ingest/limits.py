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
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        v, path, depth = stack.pop()
        if depth > limits.max_json_depth:
            raise InvalidInput(
                f"nested deeper than {limits.max_json_depth} levels", record=record, field=path
            )
        if isinstance(v, str):
            _check_text(v, record=record, field=path, limits=limits)
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise InvalidInput(
                    f"{v} is not a finite number (JSON has no NaN or Infinity)",
                    record=record,
                    field=path,
                )
        elif isinstance(v, dict):
            for k, item in v.items():
                key = str(k)
                sub = f"{path}.{printable(key)}" if path else printable(key)
                _check_text(key, record=record, field=sub, limits=limits)
                stack.append((item, sub, depth + 1))
        elif isinstance(v, list | tuple):
            stack.extend(
                (item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(v)
            )


def _check_text(text: str, *, record: str | None, field: str, limits: InputLimits) -> None:
    problem = text_problem(text)
    if problem:
        raise InvalidInput(problem, record=record, field=field or None)
    if len(text) > limits.max_field_chars:
        raise InvalidInput(
            f"{len(text)} characters, more than the {limits.max_field_chars} allowed",
            record=record,
            field=field or None,
        )


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
