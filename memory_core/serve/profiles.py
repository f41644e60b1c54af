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


def lacks(profile: Sequence[CompiledPrecondition], context: Any, keys: frozenset[str]) -> list[str]:
    """The profile's features the call lacks; none when the state gives no arguments at all
    (nothing to contradict) or a feature cannot be evaluated."""
    out = []
    for c in profile:
        if not c.variables <= keys:
            return []
        verdict = check(c, context, keys).verdict
        if verdict is Verdict.error:
            continue
        if verdict is not Verdict.held:
            out.append(c.source)
    return out


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
    for m in matches[:top_k]:
        profile = profiles.get(m.entry.card_id)
        if profile and warning_scope(m.entry.compiled) == "tool":
            missing = lacks(profile, context, keys)
            if missing:
                why[m.entry.card_id] = (
                    "its errors came with calls where "
                    + "; ".join(missing)
                    + ", and this call is not one"
                )
    if why:
        matches[:top_k] = sorted(matches[:top_k], key=lambda m: m.entry.card_id in why)
    return why
