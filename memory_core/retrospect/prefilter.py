"""The rule pre-filter: what an LLM sees of a trajectory, with the noise taken out and counted.

Drops repeats (polls, heartbeats, duplicate retries: a step identical to the one before),
cuts huge observations and long or repeated system prompts with a marker, and estimates
the tokens this saves. Token counts are estimates (4 characters a token) made the same way
before and after, so the saving is a fair ratio; the LLM's own usage is recorded apart.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from memory_core.models.trajectory import Step
from memory_core.redact import redact

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate (no tokenizer download needed offline)."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass(frozen=True)
class FilterLimits:
    """How much of each part of a trajectory the LLM gets to see."""

    max_observation_chars: int = 600
    max_message_chars: int = 1200
    max_system_chars: int = 600


@dataclass(frozen=True)
class FilteredTrajectory:
    """The prompt text of a trajectory and what filtering saved."""

    text: str
    tokens_before: int
    tokens_after: int
    dropped_steps: int
    kept_steps: int

    @property
    def tokens_saved(self) -> int:
        """Estimated tokens the filter removed."""
        return self.tokens_before - self.tokens_after


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}…[cut {len(text) - limit} chars]"


def _line(step: Step, limits: FilterLimits | None) -> str:
    if step.type == "message":
        role = step.role or "message"
        limit = (
            None
            if limits is None
            else (
                limits.max_system_chars
                if role in ("system", "developer")
                else limits.max_message_chars
            )
        )
        return f"[{step.index}] {role}: {_cut(step.text or '', limit)}"
    args = json.dumps(step.args or {}, ensure_ascii=False, sort_keys=True)
    obs_limit = None if limits is None else limits.max_observation_chars
    if step.error:
        result = "ERROR: " + _cut(step.error, obs_limit)
    else:
        result = "ok: " + _cut(step.observation or "", obs_limit)
    return f"[{step.index}] call {step.tool} {_cut(args, obs_limit)} -> {result}"


def _same(a: Step, b: Step) -> bool:
    return (a.type, a.role, a.text, a.tool, a.args, a.observation, a.error) == (
        b.type,
        b.role,
        b.text,
        b.tool,
        b.args,
        b.observation,
        b.error,
    )


def render(steps: list[Step], *, header: str, limits: FilterLimits) -> FilteredTrajectory:
    """The filtered prompt text of a trajectory, with token estimates before and after."""
    before = "\n".join([header, *(_line(s, None) for s in steps)])
    lines = [header]
    seen_system: set[str] = set()
    dropped = kept = 0
    prev: Step | None = None
    repeats = 0
    for s in steps:
        if prev is not None and _same(prev, s):
            repeats += 1
            dropped += 1
            continue
        if repeats:
            lines.append(f"    …[the step above repeated {repeats} more time(s)]")
            repeats = 0
        prev = s
        if s.type == "message" and s.role in ("system", "developer"):
            digest = hashlib.sha256((s.text or "").encode()).hexdigest()[:12]
            if digest in seen_system:
                lines.append(f"[{s.index}] {s.role}: …[same system prompt {digest} again]")
                dropped += 1
                continue
            seen_system.add(digest)
        lines.append(_line(s, limits))
        kept += 1
    if repeats:
        lines.append(f"    …[the step above repeated {repeats} more time(s)]")
    after = redact("\n".join(lines))  # nothing secret goes to the LLM
    return FilteredTrajectory(after, estimate_tokens(before), estimate_tokens(after), dropped, kept)
