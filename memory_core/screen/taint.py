"""Tainted tool calls: calls the agent made because a tool result or a user told it to.

A call is tainted when its tool (or the tool with one of its argument values) first shows up
in untrusted text (a tool's result or error, a user message after the first) shortly before
the agent made it. Such a run teaches nothing about that call: whatever the run's outcome,
the call followed the text, not the task.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memory_core.models.trajectory import Step
from memory_core.screen.decode import obfuscated, readings
from memory_core.screen.detect import directive

WINDOW = 6  # untrusted texts this many steps back can have prompted a call


def words_of(text: str) -> str:
    """Lower-case words joined by single spaces (snake_case and camelCase split)."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def _values(args: dict[str, Any] | None) -> list[str]:
    out = []
    for v in (args or {}).values():
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            w = words_of(str(v)).strip()
            if len(w) >= 3:
                out.append(f" {w} ")
    return out


def _untrusted(step: Step, first_user: int | None) -> list[tuple[str, str]]:
    """(raw reading, its words) of the untrusted texts of a step."""
    texts: list[str] = []
    if step.type == "tool_call":
        texts += [t for t in (step.observation, step.error) if t]
    elif step.role == "user" and step.index != first_user and step.text:
        texts.append(step.text)
    # a model reads rot13 or reversed text as easily as plain: so does the taint
    return [(r.lower(), words_of(r)) for t in texts for o in obfuscated(t) for r in readings(o)]


def _names(raw: str, words: str, tool: str) -> bool:
    """The text names the tool: as written (an identifier), or in words inside an order."""
    if re.search(rf"(?<![a-z0-9_]){re.escape(tool.lower())}(?![a-z0-9_])", raw):
        return True
    return words_of(tool) in words and directive(raw) is not None


def tainted_calls(steps: Sequence[Step]) -> set[int]:
    """Indexes (Step.index) of the tool calls that followed an instruction in untrusted text."""
    first_user = next((s.index for s in steps if s.type == "message" and s.role == "user"), None)
    trusted_words = " ".join(
        words_of(s.text or "")
        for s in steps
        if s.type == "message" and (s.role == "system" or s.index == first_user)
    )
    recent: list[tuple[int, list[tuple[str, str]]]] = []  # (position, texts) of untrusted steps
    called: set[str] = set()
    out: set[int] = set()
    for pos, step in enumerate(steps):
        if step.type == "tool_call" and step.tool:
            vals = _values(step.args)
            near = [t for p, ts in recent if pos - p <= WINDOW for t in ts]
            named = [w for raw, w in near if _names(raw, w, step.tool)]
            fresh = step.tool not in called and words_of(step.tool) not in trusted_words
            if named and (fresh or any(v in w for w in named for v in vals)):
                out.add(step.index)
            called.add(step.tool)
        texts = _untrusted(step, first_user)
        if texts:
            recent.append((pos, texts))
    return out
