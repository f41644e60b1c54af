"""Conversations: a plain list of chat messages without tool calls, or named sessions of turns.

Recognised by structure, never by names or ids from a particular data set:
* messages: `{"messages": [...]}` (or a bare JSON list of them) where every message has a
  role or speaker and a text, and none carries tool calls or tool results;
* sessions: an object (the record or one of its values) holding lists of turns
  (`{speaker, text}` plus an optional turn id); a sibling string key that extends a session's
  key (`<session>_date_time`, `<session>_date`) gives the session's date.

Each turn becomes one message step with its speaker, turn id and time (the message's own
timestamp, else its session's date), so a fact can point back to the turn it came from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from dateutil import parser as date_parser
from pydantic import ValidationError

from memory_core.errors import InvalidInput
from memory_core.ingest.records import RecordCommon, content_hash, outcome_of
from memory_core.models.trajectory import Step, TrajectoryCreate

SPEAKER_KEYS = ("speaker", "name", "role", "author", "from")
TEXT_KEYS = ("text", "content", "message")
TURN_ID_KEYS = ("dia_id", "turn_id", "message_id", "id")
TIME_KEYS = ("timestamp", "ts", "time", "date", "created_at")
ID_KEYS = ("id", "conversation_id", "trajectory_id", "run_id")
_TOOL_KEYS = {"tool_calls", "function_call", "tool_call_id"}
_TOOL_ROLES = {"tool", "function"}
_NOT_A_MESSAGE = {"messages", "traj", "steps"}  # a record, not a message
_COMMON = set(RecordCommon.model_fields)
_NUMBER = re.compile(r"(\d+)")


def _first(d: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        if d.get(k) not in (None, ""):
            return d[k]
    return None


def _is_turn(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and not (_TOOL_KEYS | _NOT_A_MESSAGE) & item.keys()
        and item.get("role") not in _TOOL_ROLES
        and _first(item, SPEAKER_KEYS) is not None
        and isinstance(_first(item, TEXT_KEYS), str)
    )


def is_message_list(items: Any) -> bool:
    """A non-empty list whose items are all plain chat messages (no tool calls)."""
    return isinstance(items, list) and bool(items) and all(_is_turn(i) for i in items)


def _sessions(container: Mapping[str, Any]) -> list[str]:
    """Keys of `container` that hold lists of turns (a malformed turn is reported later)."""
    return [
        k
        for k, v in container.items()
        if isinstance(v, list) and v and any(_is_turn(i) for i in v) and k not in _NOT_A_MESSAGE
    ]


def _session_container(record: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]] | None:
    for name, value in [(None, record), *record.items()]:
        if isinstance(value, dict) and _sessions(value):
            return name, value
    return None


def is_conversation(record: Mapping[str, Any]) -> bool:
    """Whether a record is a conversation in one of the two shapes above."""
    if "steps" in record or "traj" in record:
        return False
    messages = record.get("messages")
    if messages is not None:
        return is_message_list(messages)
    return _session_container(record) is not None


def parse_time(value: Any, *, field: str, record: str) -> datetime | None:
    """A timestamp (ISO text, free-form date text, or epoch seconds) as UTC; None if absent."""
    if value in (None, ""):
        return None
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            parsed: datetime = date_parser.parse(value.replace(" on ", " "), fuzzy=True)
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidInput(f"not a date or time: {value!r}", record=record, field=field) from exc
    raise InvalidInput(f"not a date or time: {value!r}", record=record, field=field)


def _turn_step(
    turn: Any, *, index: int, field: str, record: str, default_ts: datetime | None
) -> Step:
    if not isinstance(turn, dict):
        raise InvalidInput("a turn must be an object", record=record, field=field)
    if (_TOOL_KEYS & turn.keys()) or turn.get("role") in _TOOL_ROLES:
        raise InvalidInput("tool calls are not part of a conversation", record=record, field=field)
    speaker = _first(turn, SPEAKER_KEYS)
    if not isinstance(speaker, str) or not speaker.strip():
        raise InvalidInput(
            "a turn needs a speaker (or role)", record=record, field=f"{field}.speaker"
        )
    text = _first(turn, TEXT_KEYS)
    if not isinstance(text, str):
        raise InvalidInput("a turn needs a text (or content)", record=record, field=f"{field}.text")
    turn_id = _first(turn, TURN_ID_KEYS)
    role = turn.get("role") if isinstance(turn.get("role"), str) else None
    ts_key = next((k for k in TIME_KEYS if turn.get(k) not in (None, "")), None)
    ts = (
        parse_time(turn[ts_key], field=f"{field}.{ts_key}", record=record) if ts_key else default_ts
    )
    named = _first(turn, ("speaker", "name", "author", "from"))
    return Step(
        index=index,
        type="message",
        role=role or speaker.strip(),
        speaker=str(named).strip() if named else speaker.strip(),
        text=text,
        turn_id=str(turn_id) if turn_id is not None else None,
        ts=ts,
    )


def _natural(key: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in _NUMBER.split(key))


def _session_date(
    container: Mapping[str, Any], key: str, *, field: str, record: str
) -> datetime | None:
    dated = sorted(
        k for k, v in container.items() if k.startswith(f"{key}_") and isinstance(v, str) and v
    )
    if not dated:
        return None
    return parse_time(container[dated[0]], field=f"{field}{dated[0]}", record=record)


def conversation_steps(record: Mapping[str, Any], *, name: str) -> tuple[list[Step], list[str]]:
    """The turns of a conversation as message steps (time order), and the fields consumed."""
    messages = record.get("messages")
    if messages is not None:
        return [
            _turn_step(m, index=i, field=f"messages.{i}", record=name, default_ts=None)
            for i, m in enumerate(messages)
        ], ["messages"]
    found = _session_container(record)
    if found is None:
        raise InvalidInput("no turns found", record=name, field="messages")
    holder, container = found
    prefix = f"{holder}." if holder else ""
    sessions = []
    for key in _sessions(container):
        sessions.append((_session_date(container, key, field=prefix, record=name), key))
    # time order when every session is dated, else the order their names number them in
    if all(d is not None for d, _ in sessions):
        sessions.sort(key=lambda s: (s[0] or datetime.min.replace(tzinfo=UTC), _natural(s[1])))
    else:
        sessions.sort(key=lambda s: _natural(s[1]))
    steps: list[Step] = []
    for date, key in sessions:
        for i, turn in enumerate(container[key]):
            steps.append(
                _turn_step(
                    turn, index=len(steps), field=f"{prefix}{key}.{i}", record=name, default_ts=date
                )
            )
    return steps, [holder] if holder else list(container)


def parse_conversation(
    record: Mapping[str, Any], *, name: str, namespace: str, task_type: str
) -> TrajectoryCreate:
    """Validate a conversation record into a TrajectoryCreate (one message step per turn)."""
    try:
        common = RecordCommon.model_validate({k: v for k, v in record.items() if k in _COMMON})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(first["msg"], record=name, field=field) from exc
    steps, consumed = conversation_steps(record, name=name)
    if not steps:
        raise InvalidInput("a conversation needs at least one turn", record=name, field="messages")
    explicit = _first(record, ID_KEYS)
    digest = content_hash(dict(record))
    skip = set(consumed) | _COMMON | set(ID_KEYS)
    # scalars travel along; nested side data (summaries, labels) is not the conversation
    extra: dict[str, Any] = {
        k: v for k, v in record.items() if k not in skip and isinstance(v, (str, int, float, bool))
    }
    left = sorted(k for k, v in record.items() if k not in skip and k not in extra)
    if left:
        extra["not_stored"] = left
    extra["speakers"] = sorted({s.speaker for s in steps if s.speaker})
    extra.update(common.metadata)
    return TrajectoryCreate(
        key=str(explicit) if explicit is not None else f"sha256:{digest}",
        content_hash=digest,
        source_format="conversation",
        namespace=common.namespace or namespace,
        task_type=common.task_type or str(common.metadata.get("task_type") or task_type),
        agent_id=common.agent_id or common.metadata.get("agent_id"),
        outcome=outcome_of(common),
        reward=common.reward,
        steps=steps,
        extra=extra,
    )
