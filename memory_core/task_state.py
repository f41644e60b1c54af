"""The task-state vocabulary, derived the same way for extraction, replay and agents' queries."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from memory_core.models.trajectory import Step

VOCABULARY: dict[str, str] = {
    "task_type": "the kind of task (trajectory metadata or an ingest option; 'default' otherwise)",
    "agent_id": "who ran it",
    "step": "index of the tool call about to happen (0 = the first call)",
    "tools_used": "names of the tools called so far, in order",
    "last_tool": "the previous tool call's tool ('' before the first call)",
    "last_error": "the previous call's error, normalised: lower case, numbers/ids/quotes masked",
    "last_error_code": "a code visible in that error (HTTP status, exception name), else ''",
    "error_count": "tool errors so far",
    "retry_count": "consecutive calls of the same tool right before this one",
    "tool": "the call about to be made (pre-call queries)",
    "args": "the arguments of the call about to be made",
}

# the part of a state a card's evidence keeps (what its preconditions can be checked against)
CONDITION_KEYS = (
    "task_type",
    "tool",
    "last_tool",
    "last_error",
    "last_error_code",
    "retry_count",
    "error_count",
    "step",
)

# a bracketed list (an unclosed one cut at the line's end too), and a run of masked items: how
# many suggestions an error lists is not part of what the error is
_LIST = re.compile(r"\[[^\[\]]*(?:\]|$)")
_MASK_RUN = re.compile(r"<(?:s|n|id|list)>(?:\s*,\s*<(?:s|n|id|list)>)+")
_QUOTED = re.compile(r"""("[^"]*"|'[^']*'|`[^`]*`)""")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_NUMBER = re.compile(r"(?<![\w<])[-+]?\d+(?:[.,]\d+)*(?![\w>])")
_ID_TOKEN = re.compile(r"\b(?=[\w-]*\d)[\w-]*[a-z_][\w-]*\b", re.I)  # letters mixed with digits
# a number with its unit, however written ("30s", "30 s", "2.5s", "30 seconds"): one masked
# quantity with one spelling of the unit, so a wait or a size is one lesson whatever its value
# (no single letter but "s": "12b" or "4d" is as likely a seat or a gate as a size or a span)
_UNITS = {
    "ms": ("ms", "msec", "msecs", "millisecond", "milliseconds"),
    "us": ("us", "µs", "microsecond", "microseconds"),
    "ns": ("ns", "nanosecond", "nanoseconds"),
    "s": ("s", "sec", "secs", "second", "seconds"),
    "min": ("min", "mins", "minute", "minutes"),
    "h": ("hr", "hrs", "hour", "hours"),
    "d": ("day", "days"),
    "b": ("byte", "bytes"),
    "kb": ("kb", "kib"),
    "mb": ("mb", "mib"),
    "gb": ("gb", "gib"),
    "tb": ("tb", "tib"),
}
_UNIT_OF = {alias: unit for unit, aliases in _UNITS.items() for alias in aliases}
_QUANTITY = re.compile(
    r"(?<![\w.<>-])[-+]?\d+(?:[.,]\d+)*\s?("
    + "|".join(sorted(map(re.escape, _UNIT_OF), key=len, reverse=True))
    + r")\b",
    re.I,
)
_ERROR_PREFIX = re.compile(r"^\s*(?:error|exception|fatal)\s*[:\-]\s*", re.I)
_HTTP_STATUS = re.compile(
    r"\b(?:http(?:/\d(?:\.\d)?)?|status(?:[ _]?code)?|error[ _]?code|code)\s*[:=]?\s*([1-5]\d\d)\b",
    re.I,
)
_EXCEPTION_NAME = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Timeout|Refused))\b")
# the protocol's signals at the start of a text result: an "Error:"-style prefix, a Python
# traceback or exception repr ("ValueError: ..."), an HTTP status line >= 400. A result that
# merely starts with a number (a computed 408.0, a count) is data, never an error.
_ERROR_START = re.compile(
    r"^\s*(?:(?:error|exception|fatal)\s*[:\-]"
    r"|traceback \(most recent call last\)"
    r"|[A-Za-z_][\w.]*(?:Error|Exception)\s*:"
    r"|http(?:/[\d.]+)?\s+[45]\d\d\b)",
    re.I,
)
MAX_SIGNATURE_CHARS = 160


_STATUS_BEFORE = re.compile(r"(http(/[\d.]+)?|status|code)\s*[:=]?\s*$")


def _mask_number(m: re.Match[str]) -> str:
    # an HTTP status is the error's category (429 vs 503), not a varying value
    before = m.string[max(0, m.start() - 12) : m.start()].casefold()
    if len(m.group(0)) == 3 and m.group(0)[0] in "12345" and _STATUS_BEFORE.search(before):
        return m.group(0)
    return "<n>"


def normalise_error(text: str) -> str:
    """A stable signature of an error message: ids, numbers, quoted values and lists masked,
    lower case."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = _ERROR_PREFIX.sub("", first)
    first = _LIST.sub("<list>", first)
    first = _QUOTED.sub("<s>", first)
    first = _UUID.sub("<id>", first)
    first = _QUANTITY.sub(lambda m: f"<n> {_UNIT_OF[m.group(1).casefold()]}", first)
    first = _ID_TOKEN.sub("<id>", first)
    first = _NUMBER.sub(_mask_number, first)
    first = _MASK_RUN.sub("<list>", first)
    return " ".join(first.casefold().split())[:MAX_SIGNATURE_CHARS]


MIN_ECHO_CHARS = 3


def error_signature(error: str, args: dict[str, Any] | None = None) -> str:
    """The signature of a call's error: the argument values it echoes named by their key
    (so "no match for 'foo bar'" is one lesson for every query), then normalise_error."""
    text = error
    for key, value in sorted((args or {}).items(), key=lambda kv: -len(str(kv[1]))):
        if isinstance(value, str) and len(value.strip()) >= MIN_ECHO_CHARS:
            text = re.sub(re.escape(value.strip()), f"<{key}>", text, flags=re.I)
    return normalise_error(text)


def error_code(text: str) -> str:
    """An HTTP status or exception name visible in an error text, else ''."""
    status = _HTTP_STATUS.search(text)
    if status:
        return status.group(1)
    exc = _EXCEPTION_NAME.search(text)
    return exc.group(1) if exc else ""


def observation_error(observation: str) -> str | None:
    """The error a tool result reports by the protocol's signals, or None (numbers are data)."""
    if _ERROR_START.match(observation):
        return observation.strip()
    stripped = observation.lstrip()
    if stripped.startswith("{"):
        try:
            payload = json.loads(stripped)
        except ValueError:
            return None
        if isinstance(payload, dict):
            err = payload.get("error") or payload.get("errors") or payload.get("exception")
            if err:
                return err if isinstance(err, str) else json.dumps(err, sort_keys=True)
            status = payload.get("status_code", payload.get("status"))
            if isinstance(status, str) and status.isdigit():
                status = int(status)
            if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
                return f"status {status}: {payload.get('message') or payload.get('detail') or ''}"
    return None


def states_before_calls(
    steps: Sequence[Step], *, task_type: str, agent_id: str | None
) -> list[dict[str, Any]]:
    """The pre-call task state for every tool call of a trajectory, in order."""
    states: list[dict[str, Any]] = []
    tools_used: list[str] = []
    last_tool, last_error, last_code = "", "", ""
    errors = 0
    for s in steps:
        if s.type != "tool_call" or s.tool is None:
            continue
        run = 0
        for name in reversed(tools_used):
            if name != s.tool:
                break
            run += 1
        states.append(
            {
                "task_type": task_type,
                "agent_id": agent_id or "",
                "step": len(tools_used),
                "tools_used": list(tools_used),
                "last_tool": last_tool,
                "last_error": last_error,
                "last_error_code": last_code,
                "error_count": errors,
                "retry_count": run,
                "tool": s.tool,
                "args": dict(s.args or {}),
            }
        )
        tools_used.append(s.tool)
        last_tool = s.tool
        if s.error:
            errors += 1
            last_error, last_code = error_signature(s.error, s.args), error_code(s.error)
        else:
            last_error, last_code = "", ""
    return states


def planning_state(pre_call: dict[str, Any]) -> dict[str, Any]:
    """The same state without the call about to be made (what an agent knows at planning time)."""
    return {k: v for k, v in pre_call.items() if k not in ("tool", "args")}
