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
warned before. The runs of task groups that did not teach it are also tallied apart, with the
base rate there: at every call of its tool, whether its error happened (call or retry) even
where it did not warn; for a caution, the share of those runs that failed.
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
    group: str = ""  # its task group as the gate counts breadth ("group:..." or "run:...")
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
    task_group: str | None = None,
) -> StoredRun:
    """A run as the backtest replays it."""
    calls = [s for s in (Step.model_validate(x) for x in steps) if s.type == "tool_call" and s.tool]
    states = states_before_calls(calls, task_type=task_type, agent_id=agent_id)
    group = f"group:{task_group}" if task_group else f"run:{id}"
    return StoredRun(id, key, created_at, outcome, calls, states, group)


@dataclass
class Subject:
    """A card under test."""

    card: Card
    compiled: list[CompiledPrecondition]
    tool: str | None  # its `tool == "..."` literal, normalised: calls of other tools skip it
    since: datetime  # runs stored after this judge it
    names_error: bool
    groups: frozenset[str] = frozenset()  # the task groups it learned from

    @property
    def replayable(self) -> bool:
        """Keyed on the call about to be made."""
        return any(c.variables & PRE_CALL for c in self.compiled)


def subject(
    card: Card, *, since: datetime, names_error: bool, groups: Iterable[str] = ()
) -> Subject:
    """Compile a card's stored preconditions for replay."""
    compiled = [compile_stored(p, on_use=True) for p in card.preconditions]
    tool = next((m.group(1) for c in compiled if (m := _TOOL.match(c.source))), None)
    return Subject(card, compiled, tool, since, names_error, frozenset(groups))


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


@dataclass
class _Counts:
    checked: int = 0
    known: int = 0  # checked runs with an outcome, and of those, failed
    failed: int = 0
    fired: int = 0
    right: int = 0
    # on runs of task groups that did not teach the card
    other_known: int = 0
    other_failed: int = 0
    other_fired: int = 0
    other_right: int = 0
    other_calls: int = 0  # calls of its tool there, and those where its error happened
    other_erred: int = 0
    listed: list[dict[str, Any]] = field(default_factory=list)

    def tally(self, names_error: bool) -> Tally:
        if names_error:
            base = None
            other = self.other_erred / self.other_calls if self.other_calls else None
        else:
            base = self.failed / self.known if self.known else None
            other = self.other_failed / self.other_known if self.other_known else None
        return Tally(
            checked=self.checked,
            fired=self.fired,
            right=self.right,
            base=base,
            other_fired=self.other_fired,
            other_right=self.other_right,
            other_base=other,
        )


def backtest(subjects: Sequence[Subject], runs: Sequence[StoredRun]) -> dict[uuid.UUID, Any]:
    """Each card's tally and its latest warnings, over the runs stored after it."""
    by_tool: dict[str | None, list[Subject]] = {}
    for s in subjects:
        if s.replayable:
            by_tool.setdefault(s.tool, []).append(s)
    counts = {s.card.card_id: _Counts() for s in subjects}
    for run in sorted(runs, key=lambda r: (r.created_at, str(r.id)), reverse=True):
        warned: set[uuid.UUID] = set()  # outcome cautions that warned in this run already
        for s in subjects:
            if run.created_at > s.since:
                n = counts[s.card.card_id]
                n.checked += 1
                if run.outcome in ("success", "failure"):
                    other = run.group not in s.groups
                    n.known += 1
                    n.failed += run.outcome == "failure"
                    n.other_known += other
                    n.other_failed += other and run.outcome == "failure"
        for i, call in enumerate(run.calls):
            tool = normalise_text(call.tool or "")
            for s in (*by_tool.get(tool, ()), *by_tool.get(None, ())):
                if run.created_at <= s.since or s.card.card_id in warned:
                    continue
                n = counts[s.card.card_id]
                other = run.group not in s.groups
                if other and s.names_error:  # the base rate: its error here, warned or not
                    n.other_calls += 1
                    n.other_erred += bool(_warned(s, run, i))
                ctx, keys = run.context(i)
                if not holds_all(s.compiled, ctx, keys):
                    continue
                verdict = _warned(s, run, i)
                if verdict is None:
                    continue
                if not s.names_error:
                    warned.add(s.card.card_id)
                n.fired += 1
                n.right += verdict
                n.other_fired += other
                n.other_right += other and verdict
                if len(n.listed) < MAX_LISTED:
                    n.listed.append(
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
    return {
        s.card.card_id: (counts[s.card.card_id].tally(s.names_error), counts[s.card.card_id].listed)
        for s in subjects
    }
