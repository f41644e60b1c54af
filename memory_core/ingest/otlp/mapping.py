"""Spans of one trace as trajectory records in the generic step format (formats.py).

GenAI semantic conventions: `gen_ai.operation.name` is `execute_tool` (a tool call: its
`gen_ai.tool.name`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`, and on failure an
ERROR status with `error.type` and an `exception` event), `chat` (a model call; its output text
when the instrumentation captured it) or `invoke_agent` (one agent invocation). A trace with
several top-level agent invocations gives one trajectory each, any other one per trace. Every
other span is kept as context in the record's metadata. The outcome is the head span's
`hindsight.outcome` (success, failure, unknown), else its status (ERROR: failure, OK: success,
unset: unknown); `hindsight.task_type` and `hindsight.reward` on the head span (or the
resource) set those fields."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memory_core.ingest.otlp.spans import STATUS_ERROR, STATUS_OK, Span

OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_ARGS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
CHAT_OPERATIONS = {"chat", "text_completion", "generate_content"}
OUTCOME, TASK_TYPE, REWARD = "hindsight.outcome", "hindsight.task_type", "hindsight.reward"
MAX_CONTEXT = 50  # context spans kept per trajectory (names and status only)


def record_key(trace_id: str, head: Span | None, *, split: bool) -> str:
    """The trajectory's key: the trace, or the agent invocation when a trace is split."""
    return f"otel:{trace_id}:{head.span_id}" if split and head else f"otel:{trace_id}"


def _operation(span: Span) -> str:
    op = span.attributes.get(OPERATION)
    if isinstance(op, str):
        return op
    return "execute_tool" if TOOL_NAME in span.attributes else ""


def _children(spans: Sequence[Span]) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for s in spans:
        out.setdefault(s.parent_span_id, []).append(s)
    return out


def _descendants(head: Span, children: dict[str, list[Span]]) -> list[Span]:
    found, todo = [head], [head]
    while todo:
        for child in children.get(todo.pop().span_id, []):
            found.append(child)
            todo.append(child)
    return found


def _agent_heads(spans: Sequence[Span]) -> list[Span]:
    """invoke_agent spans not nested in another invoke_agent span."""
    by_id = {s.span_id: s for s in spans}
    heads = []
    for s in spans:
        if _operation(s) != "invoke_agent":
            continue
        parent = by_id.get(s.parent_span_id)
        while parent is not None and _operation(parent) != "invoke_agent":
            parent = by_id.get(parent.parent_span_id)
        if parent is None:
            heads.append(s)
    return heads


def _error_text(span: Span) -> str | None:
    """What a failed span says went wrong: the exception's message, the status message or
    `error.type`, with the type in front when the message does not name it."""
    if span.status_code != STATUS_ERROR and "error.type" not in span.attributes:
        return None
    kind = str(span.attributes.get("error.type") or "")
    message = span.status_message
    for event in span.events:
        if event["name"] == "exception":
            kind = kind or str(event["attributes"].get("exception.type") or "")
            message = str(event["attributes"].get("exception.message") or message)
    if kind and kind not in message:
        message = f"{kind}: {message}" if message else kind
    return message or "error"


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser
            return value
    return value


def _chat_text(span: Span) -> str:
    """The model's output text when the instrumentation captured it (opt-in content)."""
    raw = _json_or_text(span.attributes.get("gen_ai.output.messages"))
    parts: list[str] = []
    for message in raw if isinstance(raw, list) else []:
        for part in message.get("parts", []) if isinstance(message, dict) else []:
            if isinstance(part, dict) and part.get("type") == "text" and part.get("content"):
                parts.append(str(part["content"]))
    return "\n".join(parts)


def _step(span: Span) -> dict[str, Any] | None:
    op = _operation(span)
    ts = span.start_ns / 1e9 if span.start_ns else None
    if op == "execute_tool":
        args = _json_or_text(span.attributes.get(TOOL_ARGS))
        result = span.attributes.get(TOOL_RESULT)
        return {
            "type": "tool_call",
            "tool": str(span.attributes.get(TOOL_NAME) or span.name or "unknown"),
            "args": args if isinstance(args, dict) else ({} if args is None else {"_value": args}),
            "observation": result,
            "error": _error_text(span),
            "ts": ts,
        }
    if op in CHAT_OPERATIONS and (text := _chat_text(span)):
        return {"type": "message", "role": "assistant", "text": text, "ts": ts}
    return None


def _context(span: Span) -> dict[str, Any]:
    status = {STATUS_OK: "ok", STATUS_ERROR: "error"}.get(span.status_code, "unset")
    entry = {"name": span.name, "span_id": span.span_id, "status": status}
    if op := _operation(span):
        entry["operation"] = op
    return entry


def _outcome(*heads: Span | None) -> str:
    """The first head span's word on the outcome: its attribute, else its status."""
    for head in (h for h in heads if h is not None):
        said = head.attributes.get(OUTCOME)
        if said in ("success", "failure", "unknown"):
            return str(said)
        by_status = {STATUS_OK: "success", STATUS_ERROR: "failure"}.get(head.status_code)
        if by_status:
            return by_status
    return "unknown"


def _label(heads: Sequence[Span | None], spans: Sequence[Span], name: str) -> Any:
    """An attribute from the head spans, else from their resource or the first span's."""
    sources = [h.attributes for h in heads if h] + [h.resource for h in heads if h]
    for source in [*sources, *(s.resource for s in spans[:1])]:
        if source.get(name) is not None:
            return source[name]
    return None


def _record(
    trace_id: str,
    head: Span | None,
    spans: list[Span],
    *,
    split: bool,
    complete: bool,
    agent_span: Span | None = None,
) -> dict[str, Any]:
    spans = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    steps: list[dict[str, Any]] = []
    context: list[dict[str, Any]] = []
    for span in spans:
        step = _step(span)
        if step is not None:
            steps.append({k: v for k, v in step.items() if v is not None})
        elif span is not head and len(context) < MAX_CONTEXT:
            context.append(_context(span))
    heads = [head, agent_span]
    agent = _label(heads, [], "gen_ai.agent.name") or _label(heads, [], "gen_ai.agent.id")
    agent = agent or _label(heads, spans, "service.name")
    record: dict[str, Any] = {
        "id": record_key(trace_id, head, split=split),
        "steps": steps or [{"type": "message", "role": "system", "text": head_text(head)}],
        "outcome": _outcome(head, agent_span) if complete else "unknown",
        "metadata": {
            "otel": {
                "trace_id": trace_id,
                "head_span_id": head.span_id if head else None,
                "complete": complete,
                "spans": len(spans),
                "context": context,
            }
        },
    }
    task_type, reward = _label(heads, spans, TASK_TYPE), _label(heads, spans, REWARD)
    if task_type:
        record["task_type"] = str(task_type)
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        record["reward"] = float(reward)
    if agent:
        record["agent_id"] = str(agent)[:128]
    return record


def head_text(head: Span | None) -> str:
    """A placeholder step's text for a trace without tool calls or captured messages."""
    return f"trace span {head.name}" if head else "trace without a root span"


def trace_records(trace_id: str, spans: Sequence[Span], *, complete: bool) -> list[dict[str, Any]]:
    """The trajectory records of one trace's spans; complete: its root span is among them."""
    roots = [s for s in spans if not s.parent_span_id]
    root = roots[0] if roots else None
    heads = _agent_heads(spans)
    if len(heads) < 2:  # one trajectory for the trace: the root speaks first, then the agent
        agent = heads[0] if heads else None
        head = root or agent
        return [
            _record(trace_id, head, list(spans), split=False, complete=complete, agent_span=agent)
        ]
    children = _children(spans)
    records = []
    claimed: set[str] = set()
    for head in heads:
        group = _descendants(head, children)
        claimed.update(s.span_id for s in group)
        records.append(_record(trace_id, head, group, split=True, complete=complete))
    # spans outside every invocation (the root, a setup step) stay as the first one's context
    rest = [_context(s) for s in spans if s.span_id not in claimed]
    records[0]["metadata"]["otel"]["context"][:0] = rest[:MAX_CONTEXT]
    return records
