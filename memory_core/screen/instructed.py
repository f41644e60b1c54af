"""Instructed steps: what the agent did because a message told it to, and which message.

A call is instructed when a message that is not the agent's own reasoning (any user turn, the
task message included, or a tool's result or error) named it before the agent made it
(taint.py); a value is instructed when such a message gave it to the agent first (values.py).
Neither is experience: an instructed call is never served as a step or a fix, an instructed
value never as a value (it is withheld), and a run with an instructed call teaches nothing,
on the rule path as on the LLM path (exposure.py). A card learnt from such a run says in its
provenance which steps were instructed and by what.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.models.trajectory import Step
from memory_core.screen.values import Supplied

_SOURCE = {"task": "the task message", "user": "a user turn", "error": "a tool's error"}


def message_kind(step: Step, *, first_user: int | None) -> str:
    """How a report names the message a step is: the task message, a user turn, a tool result."""
    if step.type == "message":
        return "the task message" if step.index == first_user else f"a {step.role or 'user'} turn"
    return "a tool's error" if step.error and not step.observation else "a tool's result"


def instructed_steps(
    steps: Sequence[Step], calls: Mapping[int, int], values: Sequence[Supplied]
) -> list[dict[str, Any]]:
    """One record per instructed call (`calls`: call -> message, taint.instructed_by) and per
    instructed value: the step, what was instructed, and the message (its step and kind; never
    its text, which a reader of the card would then be served)."""
    first_user = next((s.index for s in steps if s.type == "message" and s.role == "user"), None)
    by_index = {s.index: s for s in steps}
    out: list[dict[str, Any]] = []
    for call, at in sorted(calls.items()):
        msg = by_index[at]
        out.append(
            {
                "step": call,
                "what": f"call {by_index[call].tool}",
                "by_step": at,
                "by": message_kind(msg, first_user=first_user),
            }
        )
    for v in values:
        out.append(
            {
                "step": v.call,
                "what": f"value of {v.key} (withheld)",
                "by_step": v.at,
                "by": _SOURCE.get(v.source, "a tool's result"),
            }
        )
    return out
