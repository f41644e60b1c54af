"""Keys that generalise: an argument feature keys a lesson only when it tells, across tasks,
the calls that fail from the calls of the same tool that do not.

One run's failed call and its successful retry differ in many ways (another flight list,
another cabin, another payment): each difference is a candidate, and most are the accident
of one task. A candidate atom (memory_core.retrospect.call_features) stays in a card's
preconditions only when, over the namespace's stored runs:

* it is an enumerated choice (a short word, a flag) or an identifier's kind (a prefix such as
  `gift_card_<digits>` seen with at least two different values): never a size, a count, a
  sign, a fixed-length code or a date, which describe one task's values;
* the failing calls that have it come from at least MIN_GROUPS task groups, and so do, for an
  error warning, the successful retries that dropped it (the change that preceded success,
  seen in more than one task, not one run's many differences);
* it separates: the share of failing calls that have it minus the share of the tool's other
  calls that have it is at least MIN_SEPARATION.

A failing call is, for an error warning, a call of the tool that failed with that error's
signature; for a contrast caution, a call of the tool made in a run that failed. A caution
against calling a tool at all is kept only when calling it marks failures across tasks: the
share of failed runs that call it minus the share of successful runs that do is at least
MIN_SEPARATION, the failed ones from at least MIN_GROUPS task groups (a lookup that hard
tasks need is no mistake).
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.models.trajectory import Outcome, Trajectory, TrajectoryStatus
from memory_core.retrospect.call_features import Atom, atoms, keyable
from memory_core.retrospect.contrast import task_group
from memory_core.retrospect.recovery import find_recovery, separating
from memory_core.retrospect.view_cache import VIEWS
from memory_core.task_state import error_signature

MIN_GROUPS = 2
MAX_RUNS = 5000  # the newest stored runs of a namespace a key is judged against
MIN_SEPARATION = 0.5
_ATOM_PRE = re.compile(r"^(?:has\(|size\()?args\.")


@dataclass
class _Call:
    group: str
    signature: str  # the error's, "" when the call succeeded
    failed_run: bool
    atoms: frozenset[str]
    values: dict[str, Any]


@dataclass
class CallTable:
    """Every call of the namespace's stored runs, by tool: what keys are judged against."""

    calls: dict[str, list[_Call]] = field(default_factory=lambda: defaultdict(list))
    # (tool, error signature) -> feature a successful retry dropped -> the task groups
    dropped: dict[tuple[str, str], dict[str, set[str]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(set))
    )

    # tool -> (task groups of failed runs calling it, successful runs calling it)
    runs_calling: dict[str, tuple[set[str], list[int]]] = field(
        default_factory=lambda: defaultdict(lambda: (set(), [0, 0]))
    )
    runs: list[int] = field(default_factory=lambda: [0, 0])  # failed, successful

    def add(self, view: TrajectoryView, group: str) -> None:
        """Add one run's calls."""
        failed_run = view.outcome is Outcome.failure
        calls = [s for s in view.steps if s.type == "tool_call" and s.tool]
        if view.outcome in (Outcome.failure, Outcome.success):
            self.runs[0 if failed_run else 1] += 1
            for tool in {c.tool or "" for c in calls}:
                groups, counts = self.runs_calling[tool]
                counts[0 if failed_run else 1] += 1
                if failed_run:
                    groups.add(group)
        for i, s in enumerate(calls):
            tool = s.tool or ""
            sig = error_signature(s.error, s.args) if s.error else ""
            exprs = frozenset(a.expr for a in atoms(s.args))
            self.calls[tool].append(_Call(group, sig, failed_run, exprs, dict(s.args or {})))
            if sig:
                for expr in separating(s, find_recovery(calls, i, sig, max_actions=1)):
                    self.dropped[(tool, sig)][expr].add(group)

    def tool_separates(self, tool: str) -> bool:
        """Whether calling the tool at all marks failed runs across tasks."""
        groups, (failed, succeeded) = self.runs_calling.get(tool, (set(), [0, 0]))
        if len(groups) < MIN_GROUPS or not self.runs[0]:
            return False
        share = failed / self.runs[0] - succeeded / max(self.runs[1], 1)
        return share >= MIN_SEPARATION

    def separates(self, tool: str, atom: Atom, *, signature: str | None) -> bool:
        """Whether the atom tells failing calls of the tool from its other calls across tasks
        (failing: with this error signature; with None, made in a run that failed)."""
        return self.separation(tool, atom, signature=signature) is not None

    def separation(self, tool: str, atom: Atom, *, signature: str | None) -> float | None:
        """The share of failing calls with the atom minus the share of other calls with it,
        when the atom may key a lesson (see the module's rules); else None."""
        if not keyable(atom):
            return None
        calls = self.calls.get(tool, [])
        failing = [c for c in calls if _fails(c, signature)]
        others = [c for c in calls if not _fails(c, signature)]
        having = [c for c in failing if atom.expr in c.atoms]
        if not failing or len({c.group for c in having}) < MIN_GROUPS:
            return None
        if atom.kind == "pattern" and len({str(c.values.get(atom.key)) for c in having}) < 2:
            return None  # one identifier seen again, not a kind of identifier
        if signature is not None and len(self.dropped[(tool, signature)][atom.expr]) < MIN_GROUPS:
            return None
        share_failing = len(having) / len(failing)
        share_others = sum(atom.expr in c.atoms for c in others) / max(len(others), 1)
        score = share_failing - share_others
        return score if score >= MIN_SEPARATION else None


def _fails(call: _Call, signature: str | None) -> bool:
    return call.failed_run if signature is None else call.signature == signature


def is_atom_precondition(expr: str) -> bool:
    """A precondition over the call's arguments (what a key adds to `tool == ...`)."""
    return bool(_ATOM_PRE.match(expr.strip()))


def table_of(runs: Iterable[tuple[TrajectoryView, str]]) -> CallTable:
    """The call table of (run, task group) pairs."""
    table = CallTable()
    for view, group in runs:
        table.add(view, group)
    return table


def generalise_warnings(drafts: list[DraftCard], table: CallTable) -> None:
    """Keep, in place, the one argument precondition of each error warning that separates
    best across tasks, and drop the others (without one, the warning keeps `tool == ...` and
    merges with that card).

    Every feature of the failing call is a candidate, not only the ones its own run's retry
    dropped: a run that never recovered (or recovered by another change) still made the call
    that other tasks' retries showed to be the cause, and its warning joins that keyed card
    instead of standing beside it as a second card of the same error.

    A warning that keeps a key also adds, with the same evidence, the tool's reminder of the
    error: a keyed call that failed is a call of the tool that failed, so the reminder counts
    every occurrence of the error (its support and task groups are not split between the
    nights that found a key and those that did not)."""
    reminders: list[DraftCard] = []
    for d in drafts:
        if d.pattern != "pre_call_warning" or not d.evidence:
            continue
        action = d.evidence[0].action
        tool = str(action.get("tool") or "")
        sig = str(d.evidence[0].result.get("error_signature") or "")
        scored = []
        for atom in atoms(action.get("args") or {}):
            score = table.separation(tool, atom, signature=sig)
            if score is not None:
                scored.append((-score, atom.rank, atom.expr))
        best = min(scored)[2] if scored else None
        d.preconditions = [p for p in d.preconditions if not is_atom_precondition(p)]
        if best is not None:
            reminders.append(copy.deepcopy(d))  # the tool's reminder: no key
            d.preconditions.append(best)
    drafts.extend(reminders)


def stored_tables(engine: Engine, namespaces: Iterable[str]) -> dict[str, CallTable]:
    """The call table of each namespace's stored runs (the newest MAX_RUNS; a dead letter's
    outcome is not final), each run in its task group (else alone)."""
    out: dict[str, CallTable] = {}
    with Session(engine) as session:
        for ns in sorted(set(namespaces)):
            rows = session.exec(
                select(Trajectory)
                .where(
                    col(Trajectory.namespace) == ns,
                    col(Trajectory.status) != TrajectoryStatus.dead_letter.value,
                )
                .order_by(col(Trajectory.created_at).desc(), col(Trajectory.id))
                .limit(MAX_RUNS)
            ).all()
            runs = []
            for r in rows:
                try:
                    view = VIEWS.view(r)
                except ValidationError:
                    continue  # a run whose steps do not parse is parked by its own extraction
                group = r.task_group or task_group(extra=r.extra or {}, steps=view.steps)
                runs.append((view, group or f"run:{r.id}"))
            out[ns] = table_of(runs)
    return out
