"""Runs that carry an injection: whatever an LLM wrote after reading one is not trusted.

An LLM extractor reads the whole run, tool results and user turns included. If one of them
reads as an order (the grammar screen), points the agent at a tool the run never used (the
pointer screen), or names another tool of the run by its identifier (data has no reason to
name an action: a tool result or an error is about its own call, a person does not speak in
tool identifiers), a model that follows orders can restate it in its own words anywhere in
its cards, where no screen of the card's text can tell it from advice. A run whose agent
obeyed such a message (an instructed call) shows what the message wanted, not what works. So
every draft of such a run, the LLM's and the rule extractor's alike, is held back with the
step and the reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from memory_core.models.trajectory import Step
from memory_core.screen.decode import obfuscated, readings
from memory_core.screen.detect import directive
from memory_core.screen.instructed import message_kind
from memory_core.screen.pointers import IDENTIFIER, known_identifiers, points_at_tool
from memory_core.screen.taint import instructed_by
from memory_core.screen.values import result_parts, supplied_values


def run_tools(steps: Sequence[Step]) -> frozenset[str]:
    """The run's tools whose names are identifiers (snake_case, camelCase): a one-word tool
    ("think", "search") is a plain word in text, so naming it says nothing."""
    return frozenset(
        s.tool.lower()
        for s in steps
        if s.type == "tool_call" and s.tool and IDENTIFIER.fullmatch(s.tool)
    )


# the call's own tool as the subject of its failure ("get_x: ...", "get_x failed", "in get_x")
_OWN_SUBJECT = re.compile(
    r"^\s*(?::|\(|\)|failed|error|errored|returned|raised|timed\s+out|is\s+unavailable|"
    r"refused|rejected|not\s+available)",
    re.IGNORECASE,
)
_OWN_AFTER = re.compile(r"(?:\bin|\bcalling|\bfrom|\bby)\s*$", re.IGNORECASE)


def names_a_tool(text: str, tools: frozenset[str], own: str | None = None) -> str | None:
    """Why a text names one of `tools`, or None. `own` (the call it answers) may be named as
    the subject of its own failure, not anywhere else (not with values to send it)."""
    for reading in readings(text):
        for m in IDENTIFIER.finditer(reading):
            name = m.group().lower()
            if name not in tools:
                continue
            if name == (own or "").lower() and (
                _OWN_SUBJECT.search(reading[m.end() :]) or _OWN_AFTER.search(reading[: m.start()])
            ):
                continue
            return f"names the run's tool {name!r}"
    return None


def _any(text: str, check: Callable[[str], str | None]) -> str | None:
    """The first reason `check` finds in the text as written, rot13'd or reversed."""
    for form, t in zip(("", " (rot13)", " (reversed)"), obfuscated(text), strict=True):
        why = check(t)
        if why:
            return why + form
    return None


def _names_of(tools: frozenset[str], own: str | None) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        return names_a_tool(text, tools, own)

    return check


def _result_pointer(text: str, known: frozenset[str]) -> str | None:
    """A result's prose (what is not a short field) naming an action the run never used, in
    any wording (no cue needed, as in an error: data has no reason to name another action). A
    result brings new ids ("certificate_3221322 added"): a name with digits is a value."""
    for part in result_parts(text)[1]:
        ids = {m.group().lower() for r in readings(part) for m in IDENTIFIER.finditer(r)}
        values = frozenset(i for i in ids if any(ch.isdigit() for ch in i))
        why = points_at_tool(part, known=known | values, strict=True)
        if why:
            return f"a result's text {why}"
    return None


def exposures(steps: Sequence[Step], *, tainted: Mapping[int, int] | None = None) -> list[str]:
    """Each untrusted text of the run (a tool's result or error; a user turn, the task message
    included, naming a tool of the run) that carries an instruction, with its step and the
    reason; each call the agent made on one (taint.instructed_by, or `tainted` when the caller
    has it: call -> message); each value an error or a result's prose handed the agent
    (values.py)."""
    first_user = next((s.index for s in steps if s.type == "message" and s.role == "user"), None)
    known = known_identifiers(steps)
    tools = run_tools(steps)
    out = []
    for s in steps:
        # an error is about its own call: no order, no identifier the run does not know; a
        # result is data full of field names: no order, and its prose (what is not a field)
        # no identifier the run does not know; a user asks the agent for things and gives
        # their own ids: only a tool's identifier is out of place there
        own = s.tool if s.type == "tool_call" else None
        why = None
        if s.type == "tool_call" and s.error:
            # rot13 or reversed, a run's own ids read as unknown names: the grammar only
            why = _any(s.error, directive) or points_at_tool(s.error, known=known, strict=True)
        if s.type == "tool_call" and s.observation and not why:
            why = _any(s.observation, directive) or _result_pointer(s.observation, known)
        texts = [s.error, s.observation] if s.type == "tool_call" else []
        if s.type == "message" and s.role == "user":  # the task message too
            texts = [s.text]
        for text in (t for t in texts if t and not why):
            why = _any(text, _names_of(tools, own))
        if why:
            out.append(f"step {s.index}: {why}")
    by_index = {s.index: s for s in steps}
    out += [
        f"step {i}: the agent made this call on an instruction from "
        f"{message_kind(by_index[at], first_user=first_user)} (step {at})"
        for i, at in sorted((instructed_by(steps) if tainted is None else tainted).items())
    ]
    # an order that names only a value: an error or a result's prose handed the agent a value
    # (not a number: an error may state the right amount) that it then passed
    out += [
        f"step {v.at}: the {v.source} supplied the value the agent passed as {v.key!r} "
        f"at step {v.call}"
        for v in supplied_values(steps)
        if v.source in ("error", "result") and not v.numeric
    ]
    return out
