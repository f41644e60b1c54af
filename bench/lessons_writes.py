"""Wrong writes and card usefulness for bench/lessons.py.

A write is any call whose tool name does not start with a read verb (READ_VERBS: the first
word of the name, split at `_`, `-`, spaces and camelCase). The label, per run, over the
writes that took effect (no error: an errored write changed nothing and belongs to the
recurring-errors metric):
* negative: every effective write among the task's expected actions (same tool, same
  arguments, numbers compared as numbers; a hand-off, a tool named transfer/escalate/hand off,
  by its tool name only: its free-text summary never equals the key's), in any run;
* positive: the first effective write of a failed run that is not among them;
* dropped: later off-key writes of that run (consequences of the first) and off-key writes of
  successful runs.
The expected actions are read here, to score, and never reach the memory.

Scores (from the learning runs alone), compared only between writes of the same tool
(bench.lessons_metrics.within_tool_auroc), since a tool's name alone tells which tools are
risky, not which call is wrong:
* hindsight: the strongest confidence among the pre-call cards served in the top 3 for the
  state just before the call (cards keyed on `tool` / `args`, as `check_action` serves them);
* dense kNN: the share of failed-run calls among the 5 learning write calls nearest to the
  call (all-MiniLM-L6-v2 over "tool {arguments}");
* features failed elsewhere: the call's shape (tool, argument keys and value classes) seen in
  failed runs of other tasks and never in a successful run: f / (f + 1) for f such tasks;
* run outcome (ceiling): 1 when the write's own run failed, known only afterwards.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import defaultdict
from typing import Any

READ_VERBS = frozenset(
    {
        *("get", "search", "list", "find", "lookup", "look", "read", "fetch", "query", "show"),
        *("describe", "view", "check", "count", "retrieve", "calculate", "compute", "think"),
        *("validate", "estimate"),
    }
)
_SPLIT = re.compile(r"[_\-\s]+|(?<=[a-z])(?=[A-Z])")
KNN = 5
TOP = 3


def is_write(tool: str) -> bool:
    """Not a read: the tool name's first word is no read verb."""
    words = [w for w in _SPLIT.split(tool) if w]
    return bool(words) and words[0].lower() not in READ_VERBS


def _num(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, list):
        return [_num(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _num(x) for k, x in v.items()}
    return v


def canon(tool: str, args: dict[str, Any] | None) -> str:
    """A call's canonical text, for comparing with an expected action."""
    return json.dumps([tool, _num(args or {})], sort_keys=True)


def expected_actions(record: dict[str, Any]) -> set[str] | None:
    """The task's expected actions (info.task.actions), canonical; None when absent."""
    actions = ((record.get("info") or {}).get("task") or {}).get("actions")
    if not isinstance(actions, list):
        return None
    return {canon(a.get("name", ""), a.get("kwargs", a.get("arguments"))) for a in actions}


def call_shape(tool: str, args: dict[str, Any] | None) -> str:
    """A call without its values: the tool, each argument key and its value's class."""
    from memory_core.retrospect.call_features import value_class

    return json.dumps([tool, sorted((str(k), value_class(v)) for k, v in (args or {}).items())])


def call_text(tool: str, args: dict[str, Any] | None) -> str:
    """What the dense baseline embeds for a call."""
    return f"{tool} {json.dumps(args or {}, sort_keys=True)}"


class Baselines:
    """The two baselines, fitted on the learning runs only."""

    def __init__(
        self, learned: list[Any], embedder: Any, groups: dict[str, str] | None = None
    ) -> None:
        import numpy as np

        per_tool: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.failed_tasks: dict[str, set[str]] = defaultdict(set)
        self.succeeded: set[str] = set()
        texts: list[str] = []
        self.failed: list[bool] = []
        for t in learned:
            failed = t.outcome.value == "failure"
            for s in t.steps:
                if s.type == "tool_call" and s.tool:
                    per_tool[s.tool][0] += failed
                    per_tool[s.tool][1] += 1
                    if is_write(s.tool):
                        texts.append(call_text(s.tool, s.args))
                        self.failed.append(failed)
                        shape = call_shape(s.tool, s.args)
                        if failed:
                            self.failed_tasks[shape].add((groups or {}).get(t.key, t.key))
                        else:
                            self.succeeded.add(shape)
        total = [sum(v[0] for v in per_tool.values()), sum(v[1] for v in per_tool.values())]
        self.rate = {k: v[0] / v[1] for k, v in per_tool.items()}
        self.pooled = total[0] / max(total[1], 1)
        self.embedder = embedder
        self.vectors = np.asarray(embedder.embed(texts), dtype=np.float32) if texts else None

    def failure_rate(self, tool: str) -> float:
        """The tool's past failure rate."""
        return self.rate.get(tool, self.pooled)

    def failed_elsewhere(self, tool: str, args: dict[str, Any] | None, task: str) -> float:
        """f / (f + 1) for f other tasks whose failed runs made a call of this shape, when no
        successful run made one; else 0."""
        shape = call_shape(tool, args)
        if shape in self.succeeded:
            return 0.0
        f = len(self.failed_tasks.get(shape, set()) - {task})
        return f / (f + 1)

    def dense(self, texts: list[str]) -> list[float]:
        """Share of failed-run calls among the nearest learning write calls."""
        import numpy as np

        if self.vectors is None or not texts:
            return [0.0] * len(texts)
        q = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        sims = q @ self.vectors.T
        out = []
        for row in sims:
            top = np.argsort(-row, kind="stable")[:KNN]
            out.append(sum(self.failed[i] for i in top) / len(top))
        return out


HANDOFF = re.compile(r"^(transfer|escalate|hand[_\- ]?off)", re.I)


def write_labels(calls: list[Any], expected: set[str], failed: bool) -> list[bool | None]:
    """Per call: True (first off-key effective write of a failed run), False (an effective
    write among the expected actions) or None (not a write, errored, or dropped)."""
    expected_tools = {json.loads(e)[0] for e in expected}
    out: list[bool | None] = []
    first_seen = False
    for call in calls:
        tool = call.tool or ""
        if not is_write(tool) or call.error:
            out.append(None)
            continue
        handoff = bool(HANDOFF.match(tool))
        if canon(tool, call.args) in expected or (handoff and tool in expected_tools):
            out.append(False)
        elif failed and not first_seen:
            out.append(True)
            first_seen = True
        else:
            out.append(None)
    return out


def score_writes(
    tested: list[Any],
    records: dict[str, dict[str, Any]],
    *,
    snapshot: Any,
    cards: dict[uuid.UUID, Any],
    baselines: Baselines,
    now: Any,
    groups: dict[str, str],
) -> list[dict[str, Any]]:
    """One row per labelled write of the test runs: its tool, label and each system's score."""
    from memory_core.replay import ranked_cards
    from memory_core.task_state import states_before_calls

    rows: list[dict[str, Any]] = []
    texts: list[str] = []
    for t in tested:
        expected = expected_actions(records[t.key])
        if expected is None:
            continue
        calls = [s for s in t.steps if s.type == "tool_call" and s.tool]
        states = states_before_calls(calls, task_type=t.task_type, agent_id=t.agent_id)
        failed = t.outcome.value == "failure"
        for call, state, label in zip(
            calls, states, write_labels(calls, expected, failed), strict=True
        ):
            if label is None:
                continue
            served = ranked_cards(
                snapshot=snapshot, cards=cards, state=state, top_k=TOP, now=now, pre_call_only=True
            )
            group = groups.get(t.key, t.key)
            rows.append(
                {
                    "group": group,
                    "run": t.key,
                    "tool": call.tool,
                    "positive": label,
                    "hindsight": max((c.confidence for c, _ in served), default=0.0),
                    "features failed elsewhere": baselines.failed_elsewhere(
                        call.tool or "", call.args, group
                    ),
                    "run outcome (ceiling)": float(failed),
                }
            )
            texts.append(call_text(call.tool or "", call.args))
    for row, d in zip(rows, baselines.dense(texts), strict=True):
        row["dense kNN"] = d
    return rows


def off_key(call: Any, expected: set[str] | None) -> bool:
    """A call that is not among the expected actions (a hand-off by tool name only)."""
    if expected is None:
        return False
    tool = call.tool or ""
    if HANDOFF.match(tool) and tool in {json.loads(e)[0] for e in expected}:
        return False
    return canon(tool, call.args) not in expected


def card_usefulness(engine: Any, namespace: str) -> dict[str, Any]:
    """Active cards, and the share whose evidence includes at least one successful run."""
    from sqlalchemy import func, select
    from sqlmodel import Session, col

    from memory_core.models.card import Card, CardEvidence
    from memory_core.models.trajectory import Trajectory

    with Session(engine) as s:
        rows = s.execute(
            select(col(Card.card_id), col(Card.provenance), col(Trajectory.outcome))
            .join(CardEvidence, col(CardEvidence.card_id) == col(Card.card_id))
            .join(Trajectory, col(Trajectory.id) == col(CardEvidence.trajectory_id))
            .where(col(Card.namespace) == namespace, col(Card.status) == "active")
        ).all()
        # what the LLM contrast's grounding let through, kept back or rejected (every status)
        contrast = s.execute(
            select(col(Card.status), func.count())
            .where(
                col(Card.namespace) == namespace,
                col(Card.provenance)["producer"].as_string() == "llm-contrast",
            )
            .group_by(col(Card.status))
        ).all()
    outcomes: dict[uuid.UUID, set[str]] = defaultdict(set)
    patterns: dict[uuid.UUID, str] = {}
    for cid, prov, outcome in rows:
        outcomes[cid].add(outcome)
        patterns[cid] = str((prov or {}).get("pattern", ""))
    n = len(outcomes)
    by_pattern: dict[str, int] = defaultdict(int)
    for p in patterns.values():
        by_pattern[p] += 1
    return {
        "active_cards": n,
        "with_a_successful_run": sum("success" in o for o in outcomes.values()),
        "share_with_a_successful_run": round(
            sum("success" in o for o in outcomes.values()) / max(n, 1), 4
        ),
        "by_pattern": dict(sorted(by_pattern.items())),
        "llm_contrast_by_status": {str(k): int(v) for k, v in sorted(contrast)},
    }
