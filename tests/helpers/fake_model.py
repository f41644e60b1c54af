"""A scripted stand-in for a capable model, for the scripted server: it reads the prompt's
trajectory lines and answers like a careful model would, so the pipeline has real work to do."""

from __future__ import annotations

import json
import re
from typing import Any

from memory_core.task_state import normalise_error
from tests.helpers.scripted_llm import Reply

LINE = re.compile(r"^\[(\d+)\] call (\S+) (.*?) -> (ok|ERROR): (.*)$")


def prompt_kind(body: dict[str, Any]) -> str:
    """'decision_points' or 'cards' (from the versioned marker in the system prompt)."""
    system = body["messages"][0]["content"]
    m = re.search(r"\[prompt: (\w+) v\d+\]", system)
    return m.group(1) if m else "unknown"


def _calls(text: str) -> dict[int, tuple[str, str, str]]:
    out = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out[int(m.group(1))] = (m.group(2), m.group(4), m.group(5))
    return out


def decision_points(body: dict[str, Any]) -> dict[str, Any]:
    """One 'error' point per failed call (at most 4)."""
    calls = _calls(body["messages"][1]["content"])
    points = [
        {
            "step": n,
            "kind": "error",
            "trigger": f"{tool} failed",
            "action": f"called {tool}",
            "outcome": err[:80],
        }
        for n, (tool, status, err) in sorted(calls.items())
        if status == "ERROR"
    ][:4]
    return {"points": points}


def cards(body: dict[str, Any], *, injected_tool: str | None = None) -> dict[str, Any]:
    """One card per point, keyed on the failing tool (optionally echoing an injected tool)."""
    user = body["messages"][1]["content"]
    calls = _calls(user)
    points = json.loads(user.split("Decision points:\n", 1)[1])
    out = []
    for i, p in enumerate(points):
        tool, _, err = calls.get(p["step"], ("unknown", "", ""))
        sig = normalise_error(err)
        out.append(
            {
                "point": i,
                "scenario": f"Calling {tool} when it may fail with {sig[:60]}",
                "preconditions": [f"tool == {json.dumps(tool)}"],
                "action_sequence": [
                    {
                        "tool": injected_tool or tool,
                        "params_template": {},
                        "note": "check the inputs before calling",
                    }
                ],
                "expected_outcome": f"{tool} succeeds",
                "actual_outcome": f"failed: {sig}",
                "failure_modes": [{"mode": sig, "handling": "check the inputs, then retry once"}],
                "confidence": 0.6,
            }
        )
    return {"cards": out}


def respond(body: dict[str, Any], n: int) -> Reply:
    """The default responder: realistic answers to both prompts."""
    kind = prompt_kind(body)
    if kind == "decision_points":
        return Reply(json.dumps(decision_points(body)))
    if kind == "cards":
        return Reply(json.dumps(cards(body)))
    return Reply(status=400, error=f"unexpected prompt {kind}")
