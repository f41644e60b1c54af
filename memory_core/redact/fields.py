"""Redaction applied to the shapes Hindsight derives and serves: steps, cards, history rows."""

from __future__ import annotations

from typing import Any

from memory_core.redact import redact, redact_value

# the free text of a card (and of a fact): what a reader or a prompt sees
CARD_FIELDS = (
    "scenario",
    "expected_outcome",
    "actual_outcome",
    "action_sequence",
    "failure_modes",
    "preconditions",
    "key",
    "query",
    "value",
    "provenance",  # a screen's or a reviewer's reasons may quote the run
)
STEP_FIELDS = ("text", "observation", "error", "args")


def redact_fields(data: dict[str, Any], fields: tuple[str, ...] = CARD_FIELDS) -> dict[str, Any]:
    """A copy of the mapping with the named fields redacted (strings, lists and dicts alike)."""
    out = dict(data)
    for name in fields:
        value = out.get(name)
        if value is not None:
            out[name] = redact_value(value)
    return out


def redact_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored steps as the extractors may read them: every text, observation, error and
    argument redacted (the stored trajectory itself is left as it was submitted)."""
    return [redact_fields(s, STEP_FIELDS) for s in steps]


def redact_evidence(triple: dict[str, Any]) -> dict[str, Any]:
    """An evidence triple with its condition, action and result redacted."""
    return redact_fields(triple, ("condition", "action", "result"))


__all__ = ["CARD_FIELDS", "redact", "redact_evidence", "redact_fields", "redact_steps"]
