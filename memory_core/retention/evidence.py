"""The summary form of a card's evidence once the run it cites is gone: the tool called and the
names of its arguments, the error's signature, the run's outcome and the evidence's role; every
value copied from the run's text is removed."""

from __future__ import annotations

from typing import Any

from memory_core.redact import redact

REMOVED = "[removed]"
# labels the extractors derive (names, signatures, outcomes), not text copied from the run:
# kept, redacted, so the card page's evidence table still says what was called and how it failed
LABELS = frozenset(
    {"tool", "last_tool", "task_type", "outcome", "role", "error_signature", "last_error_code"}
)


def _value(key: str, value: Any) -> Any:
    if key == "args" and isinstance(value, dict):
        return {k: REMOVED for k in value}
    if isinstance(value, dict):
        return summary_of(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and key in LABELS:
        return redact(value)
    return REMOVED


def summary_of(part: dict[str, Any]) -> dict[str, Any]:
    """One of an evidence row's parts (condition, action, result) in summary form."""
    return {k: _value(k, v) for k, v in part.items()}


def summary_result(result: dict[str, Any]) -> dict[str, Any]:
    """The result in summary form: the error reads as its signature (what the page shows)."""
    out = summary_of(result)
    if result.get("error"):
        out["error"] = out.get("error_signature") or REMOVED
    return out
