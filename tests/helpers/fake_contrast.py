"""A scripted answer to the contrast prompt: it reads the trials side by side and restates
what the rule contrast finds (a call of a failed trial whose tool, or whose word-like argument
value, no successful trial had), with a reason, citing the trials and the step. It shows the
plumbing of the LLM contrast, not what a real model would find."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.helpers.fake_model import LINE

TRIAL = re.compile(r"^=== trial ([SF]\d+) \((succeeded|failed)\) ===$")
WORD = re.compile(r"^[a-z][a-z_ ]{0,30}$")


def trials(body: dict[str, Any]) -> dict[str, list[tuple[int, str, dict[str, Any]]]]:
    """label -> [(step, tool, args)] of each trial of a contrast prompt."""
    out: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    label = None
    for line in body["messages"][1]["content"].splitlines():
        m = TRIAL.match(line)
        if m:
            label = m.group(1)
            out[label] = []
            continue
        c = LINE.match(line)
        if c and label:
            try:
                args = json.loads(c.group(3))
            except ValueError:
                args = {}
            out[label].append((int(c.group(1)), c.group(2), args if isinstance(args, dict) else {}))
    return out


def _words(args: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in args.items()
        if isinstance(v, bool) or (isinstance(v, str) and WORD.match(v))
    }


def answer(body: dict[str, Any], *, max_cards: int = 4) -> dict[str, Any]:
    """One card per failed trial: its first call that no successful trial made like that."""
    shown = trials(body)
    wins = {k: v for k, v in shown.items() if k.startswith("S")}
    if not wins:
        return {"cards": []}
    seen: dict[str, set[tuple[str, str]]] = {}
    for calls in wins.values():
        for _, tool, args in calls:
            seen.setdefault(tool, set()).update((k, json.dumps(v)) for k, v in args.items())
    cards, keys = [], set()
    for label, calls in sorted(shown.items()):
        if not label.startswith("F"):
            continue
        for step, tool, args in calls:
            if tool not in seen:
                pre, what = [f"tool == {json.dumps(tool)}"], f"called {tool}, which no success did"
            else:
                odd = sorted(
                    (k, v) for k, v in _words(args).items() if (k, json.dumps(v)) not in seen[tool]
                )
                if not odd:
                    continue
                k, v = odd[0]
                pre = [f"tool == {json.dumps(tool)}", f"args.{k} == {json.dumps(v)}"]
                what = f"called {tool} with {k} {v}, unlike the successful trial"
            if tuple(pre) in keys:
                break
            keys.add(tuple(pre))
            won = next(iter(sorted(wins)))
            ok = next((a for _, t, a in wins[won] if t == tool), None)
            action = {
                "tool": tool if ok is not None else wins[won][0][1] if wins[won] else tool,
                "params_template": {k: "<as the request says>" for k in (ok or {})},
                "note": "as the successful trial did",
            }
            cards.append(
                {
                    "failed_trial": label,
                    "step": step,
                    "successful_trial": won,
                    "difference": what,
                    "reason": "the request did not ask for it, so the task failed",
                    "scenario": f"Calling {tool} for a request",
                    "preconditions": pre,
                    "action_sequence": [action],
                    "expected_outcome": "the task succeeds",
                    "actual_outcome": "the call went through and the task failed",
                    "failure_modes": [
                        {"mode": f"{tool} called unlike the successful runs", "handling": what}
                    ],
                    "confidence": 0.6,
                }
            )
            break
    return {"cards": cards[:max_cards]}
