"""What followed a failed call: the call that succeeded after it, and how its arguments changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_core.models.trajectory import Step
from memory_core.retrospect.call_features import atoms, changed, keyable
from memory_core.task_state import error_signature


def params_template(args: dict[str, Any] | None) -> dict[str, Any]:
    """The shape of a call's arguments with the values replaced by their types."""
    names = {
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        list: "list",
        dict: "object",
        type(None): "null",
    }
    return {k: f"<{names.get(type(v), 'value')}>" for k, v in (args or {}).items()}


@dataclass(frozen=True)
class Recovery:
    """What happened after a failed call: the successful retry, if any, and the steps between."""

    retry: Step | None
    between: list[Step]
    changed_args: list[str]  # the keys that differ
    how: list[str]  # how each changed, by value class ('payment_id: "a" -> "b"')
    same_failures: int
    next_tool: str | None

    def handling(self) -> str:
        if self.retry is None:
            text = "no successful retry was seen"
            if self.same_failures:
                text += f"; {self.same_failures} more attempt(s) failed the same way"
            if self.next_tool:
                text += f"; the agent then called {self.next_tool}"
            return text
        parts = [f"retried {self.retry.tool}"]
        if self.between:
            parts.append(
                "after calling " + ", ".join(dict.fromkeys(s.tool or "" for s in self.between))
            )
        if self.how:
            parts.append("with " + "; ".join(self.how))
        else:
            parts.append("with the same arguments")
        return " ".join(parts)


def separating(failed: Step, rec: Recovery) -> list[str]:
    """The candidate keys: the argument features the failed call had and its successful retry
    had not (memory_core.retrospect.keys keeps at most one, if it separates across tasks)."""
    if rec.retry is None:
        return []
    ok = {a.expr for a in atoms(rec.retry.args)}
    return [a.expr for a in sorted(atoms(failed.args)) if keyable(a) and a.expr not in ok]


def find_recovery(calls: list[Step], i: int, sig: str, *, max_actions: int) -> Recovery:
    """The first later call of the same tool that succeeded, what ran between, what changed."""
    failed = calls[i]
    same = 0
    for j in range(i + 1, len(calls)):
        later = calls[j]
        if later.tool != failed.tool:
            continue
        if later.error is None:
            between = [c for c in calls[i + 1 : j] if c.error is None and c.tool != failed.tool]
            a, b = failed.args or {}, later.args or {}
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            return Recovery(later, between[: max_actions - 1], keys, changed(a, b), same, None)
        if error_signature(later.error, later.args) == sig:
            same += 1
    nxt = calls[i + 1].tool if i + 1 < len(calls) else None
    return Recovery(None, [], [], [], same, nxt)
