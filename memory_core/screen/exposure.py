"""Runs that carry an injection: whatever an LLM wrote after reading one is not trusted.

An LLM extractor reads the whole run, tool results and user turns included. If one of them
reads as an order (the grammar screen), points the agent at a tool the run never used (the
pointer screen), or names another tool of the run by its identifier (data has no reason to
name an action: a tool result or an error is about its own call, a person does not speak in
tool identifiers), a model that follows orders can restate it in its own words anywhere in
its cards, where no screen of the card's text can tell it from advice. So every LLM draft of
such a run is held back with the step and the reason; the rule extractor's drafts are judged
text by text as before, since they only quote what the run said.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_core.models.trajectory import Step
from memory_core.screen.decode import readings
from memory_core.screen.detect import directive
from memory_core.screen.pointers import IDENTIFIER, known_identifiers, points_at_tool
from memory_core.screen.values import supplied_values


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


def exposures(steps: Sequence[Step]) -> list[str]:
    """Each untrusted text of the run (a tool's result or error, a user turn after the first)
    that carries an instruction, with its step and the reason."""
    first_user = next((s.index for s in steps if s.type == "message" and s.role == "user"), None)
    known = known_identifiers(steps)
    tools = run_tools(steps)
    out = []
    for s in steps:
        # an error is about its own call: no order, no identifier the run does not know; a
        # result is data full of field names: no order; a user asks the agent for things
        # and gives their own ids: only a tool's identifier is out of place there
        own = s.tool if s.type == "tool_call" else None
        why = None
        if s.type == "tool_call" and s.error:
            why = directive(s.error) or points_at_tool(s.error, known=known, strict=True)
        if s.type == "tool_call" and s.observation and not why:
            why = directive(s.observation)
        texts = [s.error, s.observation] if s.type == "tool_call" else []
        if s.role == "user" and s.index != first_user:
            texts = [s.text]
        for text in texts:
            why = why or (names_a_tool(text, tools, own) if text else None)
        if why:
            out.append(f"step {s.index}: {why}")
    # an order that names only a value: an error or a result's prose handed the agent a value
    # (not a number: an error may state the right amount) that it then passed
    out += [
        f"step {v.at}: the {v.source} supplied the value the agent passed as {v.key!r} "
        f"at step {v.call}"
        for v in supplied_values(steps)
        if v.source in ("error", "result") and not v.numeric
    ]
    return out
