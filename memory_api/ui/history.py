"""A card's history as a curator reads it: each version by its actor, showing what that actor
changed; outcomes reported by agents are the use log's, folded out of the versions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# moved by uses, feedback and bookkeeping: never a field an actor's diff is about
COUNTERS = frozenset(
    {
        "use_count",
        "success_count",
        "failure_count",
        "consecutive_failures",
        "last_used_at",
        "updated_at",
        "created_at",
        "version",
        "served_outcomes",
        "served_successes",
        "withheld_outcomes",
        "withheld_successes",
        "decay_tier",
        "changed_fields",
        "confidence_before",
        "outcome",
        "use_id",
        "held_for_measure",
        "merged",
        "failed",
    }
)
_EDITED = re.compile(r"^edited in review: ([a-z_, ]+?)(?:;|$)")
_DECIDED = re.compile(r"^(approved|rejected) in review")


@dataclass
class Entry:
    """One version as shown: who, why, the fields they changed and what had moved before."""

    version: Any
    changed: list[tuple[str, Any, Any]] = field(default_factory=list)
    # fields that differ from the previous version but that this actor did not change
    unrecorded: list[tuple[str, Any, Any]] = field(default_factory=list)
    first: bool = False
    outcomes_before: int = 0  # outcomes reported between the previous version and this one


def _declared(version: Any, snap: dict[str, Any]) -> set[str] | None:
    """The fields this version's actor says it changed, when it says so."""
    if isinstance(snap.get("changed_fields"), list):
        return set(snap["changed_fields"])
    reason = version.reason or ""
    if m := _EDITED.match(reason):  # versions written before the actor named its fields
        fields = {f.strip() for f in m.group(1).split(",")}
        return fields | ({"status", "provenance"} if "quarantined" in reason else set())
    if _DECIDED.match(reason):
        return {"status"}
    return None


def _is_outcome(snap: dict[str, Any]) -> bool:
    return "use_id" in snap and "outcome" in snap


def timeline(history: list[Any]) -> tuple[list[Entry], int]:
    """Each version, newest first, with the fields its actor changed; and how many reported
    outcomes were folded into the use log (older stores kept one version per outcome)."""
    out: list[Entry] = []
    state: dict[str, Any] = {}
    folded = pending = 0
    for h in history:
        snap = h.snapshot or {}
        diff = [
            (k, state.get(k), v)
            for k, v in snap.items()
            if state and k not in COUNTERS and state.get(k) != v
        ]
        if _is_outcome(snap) and not any(k == "status" for k, _, _ in diff):
            # an outcome that changed no status is a line of the use log, not a version
            folded += 1
            pending += 1
            state = {**state, **snap}
            continue
        declared = _declared(h, snap)
        if declared is None:
            mine, other = diff, []
        else:
            mine = [d for d in diff if d[0] in declared]
            other = [d for d in diff if d[0] not in declared]
        out.append(Entry(h, mine, other, first=not state, outcomes_before=pending))
        pending = 0
        state = {**state, **snap}
    return list(reversed(out)), folded
