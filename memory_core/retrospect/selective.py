"""Selective preconditions: which calls of a tool an error comes with, not every call of it.

A warning learned from one run is keyed on the tool alone (`tool == "x"`) unless its recovery
showed the argument that mattered, so a frequent error is warned of before every call of the
tool whatever its arguments. Across the stored runs of the namespace, the calls of the tool
that failed with the error are compared with the calls of the same tool that did not (the
successes and the other errors), feature by feature (memory_core.retrospect.call_features:
keys, words, value patterns, list sizes, signs). The rule, stated:

* at least MIN_FAILING calls from at least MIN_RUNS runs failed with the error;
* a feature is a candidate when at least COVER of those calls had it;
* it is kept when the calls with it fail with the error more often than chance: a one-sided
  Fisher exact test (hypergeometric tail) at ALPHA divided by the candidates tried
  (Bonferroni); of those kept, the one the most failing calls had wins, then the one the
  fewest other calls had;
* a second feature is added only when, among the calls with the first, it passes the same
  test again (still covering COVER of the failing calls).

Otherwise the warning stays tool-wide (and keeps the feature its own recovery showed). The
chosen features replace a run's own ones, so one error of one tool is one card whatever the
runs' recoveries; the counts behind the choice are kept in the card's provenance.
"""

from __future__ import annotations

import json
import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.retrospect.call_features import Atom, atoms, cel_string
from memory_core.task_state import CONDITION_KEYS, error_signature, states_before_calls

PATTERN = "pre_call_warning"
MIN_FAILING = 3
MIN_RUNS = 2
COVER = 0.8
ALPHA = 0.05
MAX_FEATURES = 2


@dataclass(frozen=True)
class Call:
    """One stored call of a tool: its run, step, error signature ('' when it succeeded)."""

    run: uuid.UUID
    outcome: str
    step: int
    error: str
    features: frozenset[str]
    condition: Mapping[str, Any]
    args: Mapping[str, Any]


@dataclass
class Calls:
    """The stored calls of a namespace by (task type, tool), and every feature's atom."""

    by_tool: dict[tuple[str, str], list[Call]] = field(default_factory=lambda: defaultdict(list))
    atom_of: dict[str, Atom] = field(default_factory=dict)

    def add_run(self, view: TrajectoryView) -> None:
        """Every tool call of one run."""
        calls = [s for s in view.steps if s.type == "tool_call" and s.tool]
        states = states_before_calls(calls, task_type=view.task_type, agent_id=view.agent_id)
        for c, st in zip(calls, states, strict=True):
            found = atoms(c.args)
            for a in found:
                self.atom_of.setdefault(a.expr, a)
            self.by_tool[(view.task_type, c.tool or "")].append(
                Call(
                    run=view.id,
                    outcome=view.outcome.value,
                    step=int(st["step"]),
                    error=error_signature(c.error, c.args) if c.error else "",
                    features=frozenset(a.expr for a in found),
                    condition={k: st[k] for k in CONDITION_KEYS if k in st},
                    args=c.args or {},
                )
            )


def calls_of(views: Iterable[TrajectoryView]) -> Calls:
    """The calls of these runs (each run once)."""
    out, seen = Calls(), set()
    for v in views:
        if v.id not in seen:
            seen.add(v.id)
            out.add_run(v)
    return out


def fisher_tail(a: int, b: int, n_fail: int, n_other: int) -> float:
    """P(at least `a` of the failing calls have the feature) when the a + b calls with it were
    drawn at random from all calls: the one-sided Fisher exact test."""
    total, with_it = n_fail + n_other, a + b
    denom = math.comb(total, n_fail)
    top = min(n_fail, with_it)
    hits = sum(
        math.comb(with_it, k) * math.comb(total - with_it, n_fail - k) for k in range(a, top + 1)
    )
    return hits / denom if denom else 1.0


@dataclass(frozen=True)
class Selection:
    """The features chosen for one error of one tool, and the counts behind each."""

    atoms: tuple[Atom, ...]
    failing: int
    runs: int
    others: int
    failing_with: int
    others_with: int
    p_values: tuple[float, ...]

    def explain(self) -> dict[str, Any]:
        """The counts, as the card's provenance keeps them."""
        return {
            "features": [a.expr for a in self.atoms],
            "failing_calls": self.failing,
            "failing_runs": self.runs,
            "failing_with_features": self.failing_with,
            "other_calls": self.others,
            "other_calls_with_features": self.others_with,
            "p_values": [round(p, 6) for p in self.p_values],
            "rule": f"in >= {COVER:.0%} of the failing calls; Fisher p <= {ALPHA} / candidates",
        }


def _best(
    failing: Sequence[frozenset[str]], others: Sequence[frozenset[str]], n_fail: int
) -> tuple[str, float] | None:
    """The candidate feature that passes the test with the fewest other calls."""
    counts: dict[str, int] = defaultdict(int)
    for f in failing:
        for expr in f:
            counts[expr] += 1
    candidates = sorted(e for e, n in counts.items() if n >= COVER * n_fail)
    if not candidates:
        return None
    kept: list[tuple[int, int, str, float]] = []
    for expr in candidates:
        b = sum(expr in o for o in others)
        p = fisher_tail(counts[expr], b, len(failing), len(others))
        if p <= ALPHA / len(candidates):
            kept.append((-counts[expr], b, expr, p))
    if not kept:
        return None
    # the feature most failing calls had (one they all had is the error's own), then the one
    # the fewest other calls had
    _, _, expr, p = min(kept)
    return expr, p


def select(calls: Sequence[Call], error: str, atom_of: Mapping[str, Atom]) -> Selection | None:
    """The features separating the calls that failed with `error` from the others, or None."""
    failing = [c for c in calls if c.error == error]
    others = [c for c in calls if c.error != error]
    runs = len({c.run for c in failing})
    if len(failing) < MIN_FAILING or runs < MIN_RUNS or not others:
        return None
    chosen: list[str] = []
    ps: list[float] = []
    fail_set = [c.features for c in failing]
    other_set = [c.features for c in others]
    while len(chosen) < MAX_FEATURES:
        best = _best(fail_set, other_set, len(failing))
        if best is None or best[0] in chosen:
            break
        chosen.append(best[0])
        ps.append(best[1])
        fail_set = [f for f in fail_set if best[0] in f]
        other_set = [o for o in other_set if best[0] in o]
        if not other_set:
            break  # nothing left to separate from
    if not chosen:
        return None
    has_all = [c for c in failing if all(e in c.features for e in chosen)]
    return Selection(
        atoms=tuple(atom_of[e] for e in chosen),
        failing=len(failing),
        runs=runs,
        others=len(others),
        failing_with=len(has_all),
        others_with=sum(all(e in o.features for e in chosen) for o in others),
        p_values=tuple(ps),
    )


def tool_index(preconditions: Sequence[str]) -> int | None:
    """Where a warning's `tool == ...` precondition is (None: not keyed on a tool)."""
    for i, p in enumerate(preconditions):
        if p.startswith("tool == "):
            return i
    return None


def narrow(
    drafts: Sequence[DraftCard], calls: Calls, *, default_task_type: str = "default"
) -> dict[tuple[str, str, str], Selection]:
    """Give the batch's rule warnings the features that separate their error (in place); the
    selections made, by (task type, tool, error)."""
    made: dict[tuple[str, str, str], Selection | None] = {}
    for d in drafts:
        if d.pattern != PATTERN or not d.signature_parts:
            continue
        at = tool_index(d.preconditions)
        if at is None:
            continue
        tool = _literal(d.preconditions[at])
        task_type = _task_type(d.preconditions[:at]) or default_task_type
        key = (task_type, tool, d.signature_parts[0])
        if key not in made:
            made[key] = select(calls.by_tool.get((task_type, tool), []), key[2], calls.atom_of)
        sel = made[key]
        if sel is None:
            d.provenance = {**d.provenance, "selective": "none: the warning stays as learned"}
            continue
        d.preconditions = [*d.preconditions[: at + 1], *(a.expr for a in sel.atoms)]
        d.scenario += " when " + " and ".join(a.text for a in sel.atoms)
        d.provenance = {**d.provenance, "selective": sel.explain()}
    return {k: v for k, v in made.items() if v is not None}


def _literal(expr: str) -> str:
    return str(json.loads(expr.split("==", 1)[1].strip()))


def _task_type(base: Sequence[str]) -> str | None:
    for p in base:
        if p.startswith("task_type == "):
            return _literal(p)
    return None


def task_base(task_type: str, default_task_type: str = "default") -> list[str]:
    """The task-type precondition a rule card carries (none for the default type)."""
    return [] if task_type == default_task_type else [f"task_type == {cel_string(task_type)}"]
