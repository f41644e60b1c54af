"""Served warnings for bench/lessons.py: are the warnings served before a call right?

At every tool call of the test runs, the warnings are the pre-call cards (keyed on `tool` /
`args`, as `check_action` serves them) in the top 3 that name a failure. A warning is right
when its named failure happens:
* an error warning (a failure mode carrying an error signature): the call, or its retry (the
  next call of the same tool after the call failed), fails with that error
  (memory_core.replay.card_warns);
* a caution without an error (a contrast caution): the call is off the task's expected
  actions in a run that failed (read from the record to score, never by the memory).

precision = right warnings / warnings served; noise = share of the calls that succeed (no
error, and not an off-key call of a failed run) at which any warning is served. The served
lessons are the warnings of scope `call` (a card keyed on the call's arguments or state, as
`POST /v1/cards/check` names them); the tool's reminders (scope `tool`: a card naming the tool
alone, which comes with every call of it) are counted apart (`tool_*`), and both together as
`all_*`.
"""

from __future__ import annotations

import uuid
from typing import Any

from bench.lessons_writes import TOP, expected_actions, off_key

ERRORLESS = frozenset({"contrast_caution", "contrast_insight"})


def served_rows(
    tested: list[Any],
    records: dict[str, dict[str, Any]],
    *,
    snapshot: Any,
    cards: dict[uuid.UUID, Any],
    now: Any,
    groups: dict[str, str],
) -> list[dict[str, Any]]:
    """One row per test call: warnings served, how many were right, whether the call succeeded."""
    from memory_core.preconditions import compile_stored
    from memory_core.replay import card_warns, ranked_cards
    from memory_core.serve.retrieval import warning_scope
    from memory_core.task_state import error_code, error_signature, states_before_calls

    scopes = {
        cid: warning_scope([compile_stored(p, on_use=True) for p in c.preconditions])
        for cid, c in cards.items()
    }

    rows: list[dict[str, Any]] = []
    for t in tested:
        expected = expected_actions(records.get(t.key, {}))
        failed_run = t.outcome.value == "failure"
        calls = [s for s in t.steps if s.type == "tool_call" and s.tool]
        states = states_before_calls(calls, task_type=t.task_type, agent_id=t.agent_id)
        for i, (call, state) in enumerate(zip(calls, states, strict=True)):
            errors = [call.error] if call.error else []
            if call.error:
                retry = next((c for c in calls[i + 1 :] if c.tool == call.tool), None)
                if retry is not None and retry.error:
                    errors.append(retry.error)
            sigs = [(error_signature(e, call.args), error_code(e)) for e in errors]
            wrong_call = failed_run and not call.error and off_key(call, expected)
            served = ranked_cards(
                snapshot=snapshot, cards=cards, state=state, top_k=TOP, now=now, pre_call_only=True
            )
            row: dict[str, Any] = {"group": groups.get(t.key, t.key)}
            ok = not call.error and not wrong_call
            row["ok"] = int(ok)
            for scope, prefix in (("call", ""), ("tool", "tool_")):
                warnings = [c for c, _ in served if c.failure_modes and scopes[c.card_id] == scope]
                right = 0
                for c in warnings:
                    if c.provenance.get("pattern") in ERRORLESS:
                        right += wrong_call
                    else:
                        right += any(card_warns(c, signature=s, code=k) for s, k in sigs)
                row[f"{prefix}warnings"] = len(warnings)
                row[f"{prefix}right"] = right
                row[f"{prefix}ok_warned"] = int(ok and bool(warnings))
            row["all_warnings"] = row["warnings"] + row["tool_warnings"]
            row["all_right"] = row["right"] + row["tool_right"]
            row["all_ok_warned"] = int(ok and bool(row["all_warnings"]))
            rows.append(row)
    return rows
