"""Input formats: OpenAI chat-message runs and generic step lists, validated into Steps."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory_core.errors import InvalidInput
from memory_core.ingest import conversations
from memory_core.ingest.limits import DEFAULT_LIMITS, InputLimits, check_record
from memory_core.ingest.records import RecordCommon, content_hash, outcome_of
from memory_core.ingest.shrink import cut_observation, cut_text
from memory_core.models.trajectory import Step, TrajectoryCreate
from memory_core.task_state import observation_error

_CONSUMED = {
    "id",
    "trajectory_id",
    "run_id",
    "messages",
    "traj",
    "steps",
    "outcome",
    "reward",
    "task_type",
    "agent_id",
    "namespace",
    "metadata",
}
_MAX_LABEL = 128


class _Function(BaseModel):
    name: str = Field(min_length=1)
    arguments: str | dict[str, Any] | None = None


class _ToolCall(BaseModel):
    id: str | None = None
    function: _Function


class _ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[_ToolCall] | None = None
    function_call: _Function | None = None
    tool_call_id: str | None = None
    name: str | None = None


class _GenericStep(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["tool_call", "tool", "action", "call", "message"]
    tool: str | None = Field(default=None, min_length=1)
    args: dict[str, Any] | str | None = None
    observation: Any = None
    error: str | None = None
    role: str | None = None
    text: str | None = None
    content: str | None = None
    ts: datetime | float | None = None


class _ChatRecord(RecordCommon):
    messages: list[_ChatMessage] = Field(min_length=1)


class _StepsRecord(RecordCommon):
    steps: list[_GenericStep] = Field(min_length=1)


def _text(content: str | list[dict[str, Any]] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


def _args(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"_raw": raw}  # the agent sent unparseable arguments: keep them as they were
    return parsed if isinstance(parsed, dict) else {"_value": parsed}


def _chat_steps(rec: _ChatRecord, max_obs: int, max_msg: int) -> list[Step]:
    steps: list[Step] = []
    open_calls: dict[str, list[int]] = {}  # call id -> unanswered step indices (ids may repeat)
    for msg in rec.messages:
        text = _text(msg.content)
        if msg.role in ("tool", "function"):
            idx = _match_call(steps, open_calls, msg.tool_call_id, msg.name)
            if idx is None:
                steps.append(Step(index=len(steps), type="tool_call", tool=msg.name or "unknown"))
                idx = len(steps) - 1
            err = observation_error(text)
            steps[idx] = steps[idx].model_copy(
                update={"observation": cut_observation(text, max_obs), "error": err and err[:1000]}
            )
            continue
        if text.strip():
            text = cut_text(text, max_msg)
            steps.append(Step(index=len(steps), type="message", role=msg.role, text=text))
        calls = list(msg.tool_calls or [])
        if msg.function_call is not None:
            calls.append(_ToolCall(function=msg.function_call))
        for call in calls:
            steps.append(
                Step(
                    index=len(steps),
                    type="tool_call",
                    tool=call.function.name,
                    args=_args(call.function.arguments),
                )
            )
            open_calls.setdefault(call.id or call.function.name, []).append(len(steps) - 1)
    return steps


def _match_call(
    steps: list[Step], open_calls: dict[str, list[int]], call_id: str | None, name: str | None
) -> int | None:
    for key in (call_id, name):
        if key and open_calls.get(key):
            return open_calls[key].pop(0)
    if name:  # answered by name only: the latest unanswered call of that tool
        for s in reversed(steps):
            if s.type == "tool_call" and s.tool == name and s.observation is None:
                return s.index
    return None


def _generic_steps(rec: _StepsRecord, max_obs: int, max_msg: int) -> list[Step]:
    steps: list[Step] = []
    for i, raw in enumerate(rec.steps):
        ts = raw.ts
        if isinstance(ts, float):
            ts = datetime.fromtimestamp(ts, UTC)
        elif isinstance(ts, datetime) and ts.tzinfo is None:
            ts = ts.replace(tzinfo=UTC)
        if raw.type == "message":
            steps.append(
                Step(
                    index=len(steps),
                    type="message",
                    role=raw.role or "assistant",
                    text=cut_text(raw.text or raw.content or "", max_msg),
                    ts=ts,
                )
            )
            continue
        if raw.tool is None:
            raise InvalidInput("a tool_call step needs a 'tool'", field=f"steps.{i}.tool")
        obs = raw.observation
        obs_text = obs if isinstance(obs, str) or obs is None else json.dumps(obs, sort_keys=True)
        err = raw.error or (observation_error(obs_text) if obs_text else None)
        steps.append(
            Step(
                index=len(steps),
                type="tool_call",
                tool=raw.tool,
                args=_args(raw.args),
                observation=cut_observation(obs_text, max_obs) if obs_text else None,
                error=err and err[:1000],
                ts=ts,
            )
        )
    return steps


def parse_record(
    record: Any,
    *,
    name: str,
    namespace: str,
    task_type: str,
    max_observation_chars: int = 4000,
    limits: InputLimits = DEFAULT_LIMITS,
) -> TrajectoryCreate:
    """Validate one raw record into a TrajectoryCreate; InvalidInput names the record and field."""
    if not isinstance(record, dict):
        raise InvalidInput(f"expected a JSON object, got {type(record).__name__}", record=name)
    check_record(record, name=name, limits=limits)  # NUL, surrogates, NaN, depth, sizes
    if conversations.is_conversation(record):
        conv = conversations.parse_conversation(
            record, name=name, namespace=namespace, task_type=task_type
        )
        cap = limits.max_message_chars
        steps = [
            s.model_copy(update={"text": cut_text(s.text, cap)}) if s.text else s
            for s in conv.steps
        ]
        return conv.model_copy(update={"steps": steps})
    body = dict(record)
    alias = "traj" if "traj" in body and "messages" not in body else "messages"
    if alias == "traj":
        body["messages"] = body.pop("traj")
    try:
        parsed: _ChatRecord | _StepsRecord
        if "messages" in body:
            parsed, fmt = _ChatRecord.model_validate(body), "openai_chat"
            steps = _chat_steps(parsed, max_observation_chars, limits.max_message_chars)
        elif "steps" in body:
            parsed, fmt = _StepsRecord.model_validate(body), "steps"
            steps = _generic_steps(parsed, max_observation_chars, limits.max_message_chars)
        else:
            raise InvalidInput(
                "needs 'messages' (OpenAI chat format) or 'steps'", record=name, field="messages"
            )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]).replace("messages", alias, 1)
        raise InvalidInput(first["msg"], record=name, field=field) from exc
    except InvalidInput as exc:
        if exc.record is None:
            raise InvalidInput(str(exc).split(": ", 1)[-1], record=name, field=exc.field) from exc
        raise
    explicit = record.get("id", record.get("trajectory_id", record.get("run_id")))
    digest = content_hash(record)
    extra = {k: v for k, v in record.items() if k not in _CONSUMED}
    extra.update(parsed.metadata)
    agent = parsed.agent_id or parsed.metadata.get("agent_id")
    kind = parsed.task_type or str(parsed.metadata.get("task_type") or task_type)
    for field_name, value in (("metadata.task_type", kind), ("metadata.agent_id", agent)):
        if value is not None and len(str(value)) > _MAX_LABEL:  # a column of 128 characters
            raise InvalidInput(
                f"longer than {_MAX_LABEL} characters", record=name, field=field_name
            )
    return TrajectoryCreate(
        key=str(explicit) if explicit is not None else f"sha256:{digest}",
        content_hash=digest,
        source_format=fmt,  # type: ignore[arg-type]
        namespace=parsed.namespace or namespace,
        task_type=kind,
        agent_id=None if agent is None else str(agent),
        outcome=outcome_of(parsed),
        reward=parsed.reward,
        steps=steps,
        extra=extra,
    )
