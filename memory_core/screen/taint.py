"""Instructed tool calls: calls the agent made because a message told it to.

A call is *instructed* (tainted) when its tool (or the tool with one of its argument values)
first shows up in a message that is not the agent's own reasoning (a tool's result or error,
any user turn, the task message included) before the agent made it: named as an identifier in
any decoded reading (no cue word needed: a person asking for their own task describes it in
words, not in tool identifiers), or in words inside an order. A tool's text counts for the few
steps after it; a user's turn for the rest of the run (an order such as "always call X before
any booking" is standing). Such a run teaches nothing about that call: whatever the run's
outcome, the call followed the text, not the experience. Only the system prompt (the
operator's) is trusted.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from typing import Any

from memory_core.models.trajectory import Step
from memory_core.screen.decode import obfuscated, readings
from memory_core.screen.detect import directive
from memory_core.text_memo import text_memo

WINDOW = 6  # untrusted texts this many steps back can have prompted a call


_CAMEL = re.compile(r"([a-z])([A-Z])")
_WORD = re.compile(r"[a-z0-9]+")
_IDENT = re.compile(r"[a-z0-9_]+")
_PLAIN = re.compile(r"[a-z]+|[A-Z][a-z]+")  # a tool named by a plain word of prose


@text_memo(8192)
def words_of(text: str) -> str:
    """Lower-case words joined by single spaces (snake_case and camelCase split)."""
    return " " + " ".join(_WORD.findall(_CAMEL.sub(r"\1 \2", text).lower())) + " "


def _values(args: dict[str, Any] | None) -> list[str]:
    out = []
    for v in (args or {}).values():
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            w = words_of(str(v)).strip()
            if len(w) >= 3:
                out.append(f" {w} ")
    return out


class _Text:
    """One reading of an untrusted text, with what the checks against each call need."""

    __slots__ = ("_idents", "_order", "raw", "words")

    def __init__(self, reading: str) -> None:
        self.raw = reading.lower()
        self.words = words_of(reading)
        self._idents: frozenset[str] | None = None
        self._order: bool | None = None

    def names(self, tool: str, tool_words: str) -> bool:
        """The text names the tool: as written (an identifier), or in words inside an order."""
        low = tool.lower()
        if _PLAIN.fullmatch(tool):
            pass  # a one-word tool ("think", "search") is a plain word: only an order names it
        elif _IDENT.fullmatch(low):  # as an identifier token: a set lookup, not a regex per call
            if self._idents is None:
                self._idents = frozenset(_IDENT.findall(self.raw))
            if low in self._idents:
                return True
        elif re.search(rf"(?<![a-z0-9_]){re.escape(low)}(?![a-z0-9_])", self.raw):
            return True
        if tool_words not in self.words:
            return False
        if self._order is None:
            self._order = directive(self.raw) is not None
        return self._order


def _untrusted(step: Step) -> list[_Text]:
    """The readings of the untrusted texts of a step."""
    texts: list[str] = []
    if step.type == "tool_call":
        texts += [t for t in (step.observation, step.error) if t]
    elif step.type == "message" and step.role == "user" and step.text:
        texts.append(step.text)
    # a model reads rot13 or reversed text as easily as plain: so does the taint
    return [_Text(r) for t in texts for o in obfuscated(t) for r in readings(o)]


def instructed_by(steps: Sequence[Step]) -> dict[int, int]:
    """For each tool call made on an instruction from a message, the step (Step.index) of the
    message that gave it: {call: message}."""
    trusted_words = " ".join(
        words_of(s.text or "") for s in steps if s.type == "message" and s.role == "system"
    )
    # (position, step index, texts) of untrusted steps: a tool's for WINDOW steps, a user's
    # turn for the rest of the run
    recent: deque[tuple[int, int, list[_Text]]] = deque()
    said: list[tuple[int, int, list[_Text]]] = []
    called: set[str] = set()
    out: dict[int, int] = {}
    for pos, step in enumerate(steps):
        while recent and pos - recent[0][0] > WINDOW:
            recent.popleft()
        if step.type == "tool_call" and step.tool:
            vals = _values(step.args)
            tool_words = words_of(step.tool)
            fresh = step.tool not in called and tool_words not in trusted_words
            # the latest message that named it is the one credited
            for _, at, ts in sorted([*recent, *said], key=lambda r: r[0], reverse=True):
                named = [t.words for t in ts if t.names(step.tool, tool_words)]
                if named and (fresh or any(v in w for w in named for v in vals)):
                    out[step.index] = at
                    break
            called.add(step.tool)
        texts = _untrusted(step)
        if texts:
            (said if step.type == "message" else recent).append((pos, step.index, texts))
    return out


def tainted_calls(steps: Sequence[Step]) -> set[int]:
    """Indexes (Step.index) of the tool calls that followed an instruction in untrusted text."""
    return set(instructed_by(steps))
