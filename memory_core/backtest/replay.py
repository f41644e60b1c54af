"""Replay a card's pre-call preconditions over stored runs and count its warnings.

At every tool call of a run, the task state known just before the call (the one
`memory_core.replay` replays with: `states_before_calls`) is put to the card's preconditions.
Where they all hold, the card warns, and the warning is

* for a card that names an error (its evidence saw the error at the call): right when that
  call, or the retry that followed its failure (the next call of the same tool), failed with an
  error the card warns about (`memory_core.replay.card_warns`, as replay judges a hit);
* for a caution that names the run's failure (learned by contrasting failed and successful
  runs of one task): one warning a run at most (its first call that matches), right when the
  run failed; a run without a known outcome is not counted. Its tally carries the share of the
  checked runs that failed, the rate such a caution must beat.

Only runs stored after the card was learned count (for an operator's approval: after it), so
no run it learned from judges it; a later run that went on to teach it again counts, since it
warned before.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_core.backtest.rule import Tally
from memory_core.models.card import Card
from memory_core.models.trajectory import Step
from memory_core.preconditions import (
    CompiledPrecondition,
    compile_stored,
    holds_all,
    make_context,
    normalise_text,
)
from memory_core.replay import PRE_CALL, card_warns
from memory_core.task_state import error_code, error_signature, states_before_calls

MAX_LISTED = 20  # warnings listed on the card's page, latest first
_TOOL = re.compile(r'^tool\s*==\s*"([^"\\]*)"$')


@dataclass
class StoredRun:
    """One stored run, its calls and the state before each."""

    id: uuid.UUID
    key: str
    created_at: datetime
    outcome: str
    calls: list[Step]
    states: list[dict[str, Any]]
    _contexts: list[Any] = field(default_factory=list)

    def context(self, i: int) -> tuple[Any, frozenset[str]]:
        """The evaluation context of call i's state (built once per run)."""
        if not self._contexts:
            self._contexts = [(make_context(s), frozenset(s)) for s in self.states]
        return self._contexts[i]  # type: ignore[no-any-return]


def stored_run(
    *,
    id: uuid.UUID,
    key: str,
    created_at: datetime,
    outcome: str,
    task_type: str,
    agent_id: str | None,
    steps: Iterable[dict[str, Any]],
) -> StoredRun:
    """A run as the backtest replays it."""
    calls = [s for s in (Step.model_validate(x) for x in steps) if s.type == "tool_call" and s.tool]
    states = states_before_calls(calls, task_type=task_type, agent_id=agent_id)
    return StoredRun(id, key, created_at, outcome, calls, states)


@dataclass
class Subject:
    """A card under test."""

    card: Card
    compiled: list[CompiledPrecondition]
    tool: str | None  # its `tool == "..."` literal, normalised: calls of other tools skip it
    since: datetime  # runs stored after this judge it
    names_error: bool

    @property
    def replayable(self) -> bool:
        """Keyed on the call about to be made."""
        return any(c.variables & PRE_CALL for c in self.compiled)


def subject(card: Card, *, since: datetime, names_error: bool) -> Subject:
    """Compile a card's stored preconditions for replay."""
    compiled = [compile_stored(p, on_use=True) for p in card.preconditions]
    tool = next((m.group(1) for c in compiled if (m := _TOOL.match(c.source))), None)
    return Subject(card, compiled, tool, since, names_error)


def _warned(s: Subject, run: StoredRun, i: int) -> bool | None:
    """Whether the warning at call i was right (None: it cannot be judged)."""
    if not s.names_error:
        if run.outcome not in ("success", "failure"):
            return None
        return run.outcome == "failure"
    call = run.calls[i]
    if not call.error:
        return False
    tries = [call]
    retry = next((c for c in run.calls[i + 1 :] if c.tool == call.tool), None)
    if retry is not None:  # the retry of the failed call
        tries.append(retry)
    return any(
        t.error
        and card_warns(s.card, signature=error_signature(t.error, t.args), code=error_code(t.error))
        for t in tries
    )


def backtest(subjects: Sequence[Subject], runs: Sequence[StoredRun]) -> dict[uuid.UUID, Any]:
    """Each card's tally and its latest warnings, over the runs stored after it."""
    by_tool: dict[str | None, list[Subject]] = {}
    for s in subjects:
        if s.replayable:
            by_tool.setdefault(s.tool, []).append(s)
    checked = {s.card.card_id: 0 for s in subjects}
    known = dict.fromkeys(checked, 0)  # checked runs with an outcome, and of those, failed
    failed = dict.fromkeys(checked, 0)
    fired = dict.fromkeys(checked, 0)
    right = dict.fromkeys(checked, 0)
    listed: dict[uuid.UUID, list[dict[str, Any]]] = {cid: [] for cid in checked}
    for run in sorted(runs, key=lambda r: (r.created_at, str(r.id)), reverse=True):
        warned: set[uuid.UUID] = set()  # outcome cautions that warned in this run already
        for s in subjects:
            if run.created_at > s.since:
                checked[s.card.card_id] += 1
                if run.outcome in ("success", "failure"):
                    known[s.card.card_id] += 1
                    failed[s.card.card_id] += run.outcome == "failure"
        for i, call in enumerate(run.calls):
            tool = normalise_text(call.tool or "")
            for s in (*by_tool.get(tool, ()), *by_tool.get(None, ())):
                if run.created_at <= s.since or s.card.card_id in warned:
                    continue
                ctx, keys = run.context(i)
                if not holds_all(s.compiled, ctx, keys):
                    continue
                verdict = _warned(s, run, i)
                if verdict is None:
                    continue
                cid = s.card.card_id
                if not s.names_error:
                    warned.add(cid)
                fired[cid] += 1
                right[cid] += verdict
                if len(listed[cid]) < MAX_LISTED:
                    listed[cid].append(
                        {
                            "trajectory_id": str(run.id),
                            "run": run.key,
                            "call": i,
                            "step": call.index,
                            "tool": call.tool,
                            "right": verdict,
                            "error": error_signature(call.error, call.args) if call.error else None,
                            "outcome": run.outcome,
                        }
                    )
    names_error = {s.card.card_id: s.names_error for s in subjects}
    return {
        cid: (
            Tally(
                checked=checked[cid],
                fired=fired[cid],
                right=right[cid],
                base=None if names_error[cid] or not known[cid] else failed[cid] / known[cid],
            ),
            listed[cid],
        )
        for cid in checked
    }
