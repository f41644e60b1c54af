"""A tool's reminders in the order of the calls they came with.

Several reminders of one tool (cards naming the tool alone, each warning of one error) match
every call of the tool and tie. A reminder's profile (memory_core.cards.profile: the argument
kinds every call behind it had, across task groups) says which calls its error came with: a
call that lacks one of them is not such a call, and the reminder goes after the others, in
their order. Only the top k are looked at, by the same precondition engine as the cards'.

Layer: retrieval.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.preconditions import CompiledPrecondition, Verdict, check
from memory_core.serve.topk import Ranked


def warning_scope(compiled: Sequence[CompiledPrecondition]) -> str:
    """'call' when a card tests the call's arguments or the state beyond the tool's name (a
    lesson about calls like this one), 'tool' when it names the tool alone: a reminder that
    comes with every call of the tool, right only as often as the tool fails."""
    return "tool" if all(c.variables <= {"tool"} for c in compiled) else "call"


def lacks(
    profile: Sequence[CompiledPrecondition],
    context: Any,
    keys: frozenset[str],
    seen: dict[str, bool],
) -> str | None:
    """The first of the profile's features the call lacks (None: it has them all, the state
    gives no arguments at all, or a feature cannot be evaluated). `seen`: the verdicts of this
    call so far, as a tool's reminders share features (a regular expression costs ~70 us)."""
    for c in profile:
        if not c.variables <= keys:
            return None
        has = seen.get(c.source)
        if has is None:
            verdict = check(c, context, keys).verdict
            has = seen[c.source] = verdict is Verdict.held or verdict is Verdict.error
        if not has:
            return c.source
    return None


def demote(
    matches: list[Ranked],
    top_k: int,
    profiles: Mapping[uuid.UUID, Sequence[CompiledPrecondition]],
    context: Any,
    keys: frozenset[str],
) -> dict[uuid.UUID, str]:
    """Put the top k's reminders whose profile the call contradicts after the others (stably,
    in place); why, by card."""
    if not profiles:
        return {}
    why: dict[uuid.UUID, str] = {}
    seen: dict[str, bool] = {}
    top, ahead, late = matches[:top_k], [], []
    for m in top:
        profile = profiles.get(m.entry.card_id)
        missing = None
        if profile and warning_scope(m.entry.compiled) == "tool":
            missing = lacks(profile, context, keys, seen)
        if missing is None:
            ahead.append(m)
        else:
            late.append(m)
            why[m.entry.card_id] = (
                f"its errors came with calls where {missing}, and this call is not one"
            )
    if late:
        matches[: len(top)] = ahead + late
    return why
