"""Contrast: what the runs of one task that failed did and the runs that succeeded did not.

Most failed runs contain no tool error: the agent did the wrong thing and the tools obeyed.
Such a failure only shows beside a successful run of the same task, so runs are grouped by
task (`task_group`) and, in every group with at least one success and one failure, each call
of a failed run is compared with the calls of the successful runs:

* a call whose tool no successful run called, or whose argument features (keys, value
  classes: memory_core.retrospect.call_features) no successful call of that tool had, becomes
  a caution keyed on those features (`tool == ... && args...`): it fires on calls that look
  like the failing one, not on every call of the tool. An identifier's shape (its length, its
  letters or digits) never is such a feature: the ids of one task's runs differ by accident;
* a call made without a tool that every successful run had called before it (the order
  differs) becomes a caution keyed on that state (`!("t" in tools_used)`), whose action
  sequence is what the successful runs did first.

Each card's evidence names the failed runs behind it (supporting), the group and the runs it
was contrasted with; its confidence is the evidence estimate (memory_core.cards.confidence),
over task groups: the failed trials of one task are one piece of evidence, not several.
The same caution from several tasks has the same preconditions, hence the same signature:
it is one card whose evidence grows. Re-running a group adds nothing (evidence is unique per
card, run and step).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.cards.confidence import RunEvidence, estimate
from memory_core.models.card import ActionStep, EvidenceTriple, FailureMode
from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.models.trajectory import Outcome, Step
from memory_core.retrospect.call_features import Atom, atoms, cel_string, template
from memory_core.screen.taint import tainted_calls
from memory_core.task_state import CONDITION_KEYS, states_before_calls

PRODUCER = "contrast"
MAX_ATOMS = 2
# argument features a caution keeps (the most specific first): a list's size is one task's
# count, never a key
CATEGORICAL = frozenset({"word", "bool"})
GROUP_TEXT_CHARS = 500
MAX_GROUP_CHARS = 255  # trajectory.task_group
TASK_ID_KEYS = ("task_id", "task", "instance_id", "question_id")
_SPACE = re.compile(r"\s+")


def task_group(*, extra: Mapping[str, Any], steps: Sequence[Step]) -> str | None:
    """The task a run belongs to, by a stated rule.

    1. An explicit task id in the record (`task_id`, `task`, `instance_id`, `question_id`,
       top level or in `metadata`): "id:<value>".
    2. Else the first user (or, without one, system-free first) message, case-folded with
       whitespace collapsed, first 500 characters, hashed: "text:<sha1>". Numbers and names
       are kept: two requests that differ in them are different tasks.
    3. Else None: the run is compared with no other.
    """
    for key in TASK_ID_KEYS:
        value = extra.get(key)
        if value is not None and not isinstance(value, dict | list) and str(value).strip():
            return fit_group(f"id:{value}")
    first = next(
        (s.text for s in steps if s.type == "message" and s.role == "user" and s.text), None
    )
    if not first:
        return None
    text = _SPACE.sub(" ", first.casefold()).strip()[:GROUP_TEXT_CHARS]
    return "text:" + hashlib.sha1(text.encode()).hexdigest()


def fit_group(key: str) -> str:
    """A group key as stored (trajectory.task_group holds 255 characters): a longer task id
    is named by its hash."""
    if len(key) <= MAX_GROUP_CHARS:
        return key
    kind, _, value = key.partition(":")
    return f"{kind}:sha1:{hashlib.sha1(value.encode()).hexdigest()}"


@dataclass
class _Caution:
    tool: str
    atoms: tuple[Atom, ...]
    order: tuple[str, ...]  # tools the successful runs called first and this run did not
    support: dict[Any, tuple[int, dict[str, Any], Step]]  # run id -> (call index, state, call)


def _calls(v: TrajectoryView) -> tuple[list[Step], list[dict[str, Any]]]:
    calls = [s for s in v.steps if s.type == "tool_call" and s.tool]
    return calls, states_before_calls(calls, task_type=v.task_type, agent_id=v.agent_id)


def contrast_group(
    runs: Sequence[TrajectoryView],
    *,
    group: str,
    default_task_type: str = "default",
    skip_tainted: bool = True,
    tainted_of: Callable[[TrajectoryView], Collection[int]] | None = None,
    keeps: Callable[[str, Atom | None], bool] | None = None,
) -> list[DraftCard]:
    """Cautions separating the failed runs of one task from its successful runs.

    `keeps(tool, atom)` says whether an argument feature (None: the call itself) may key a
    caution (one that separates across tasks: memory_core.retrospect.keys); without it,
    every feature may.

    With skip_tainted, a failed run's calls made on an instruction from untrusted text (a
    tool result, a later user turn: memory_core.screen.taint) teach nothing, judged on that
    run's own steps, so a caution never depends on which run of the batch carries it."""
    wins = [r for r in runs if r.outcome is Outcome.success]
    losses = [r for r in runs if r.outcome is Outcome.failure]
    if not wins or not losses:
        return []  # nothing to contrast with
    win_atoms: dict[str, set[str]] = defaultdict(set)
    win_calls: dict[str, Step] = {}
    first_before: dict[str, set[str]] = {}  # tool -> tools every winning run called before it
    win_steps: dict[Any, dict[str, tuple[int, dict[str, Any], Step]]] = {}
    for r in wins:
        calls, states = _calls(r)
        seen: set[str] = set()
        win_steps[r.id] = {}
        for i, (c, st) in enumerate(zip(calls, states, strict=True)):
            win_steps[r.id].setdefault(c.tool or "", (i, st, c))
            win_steps[r.id].setdefault("", (i, st, c))  # the run's first call
            tool = c.tool or ""
            win_atoms[tool].update(a.expr for a in atoms(c.args))
            win_calls.setdefault(tool, c)
            if tool not in seen:
                before = set(st["tools_used"]) - {tool}
                first_before[tool] = first_before.get(tool, before) & before
                seen.add(tool)
    cautions: dict[tuple[str, tuple[str, ...], tuple[str, ...]], _Caution] = {}
    for r in losses:
        calls, states = _calls(r)
        tainted: Collection[int] = set()
        if skip_tainted:
            tainted = tainted_calls(r.steps) if tainted_of is None else tainted_of(r)
        for i, (c, st) in enumerate(zip(calls, states, strict=True)):
            if c.error or c.index in tainted:
                continue  # an error teaches through its own warning card
            tool = c.tool or ""
            mine = [a for a in atoms(c.args) if keeps is None or keeps(tool, a)]
            order: tuple[str, ...] = ()
            if tool not in win_calls:
                # no success made this call at all: keep only choices that recur across tasks
                # (words, flags), not the identifiers of this task
                chosen = sorted(a for a in mine if a.kind in CATEGORICAL)[:MAX_ATOMS]
                if not chosen and keeps is not None and not keeps(tool, None):
                    continue  # "at all": calling the tool must itself mark failures elsewhere
            else:
                # what the successful calls never had, but not an identifier's shape: that two
                # runs' ids differ in length or letters is this task's accident, not a lesson
                chosen = sorted(
                    a for a in mine if a.expr not in win_atoms[tool] and a.kind != "pattern"
                )[:MAX_ATOMS]
                if not chosen:
                    missing = sorted(first_before.get(tool, set()) - set(st["tools_used"]))
                    if not missing:
                        continue  # this call looks like the successful runs' calls
                    order = (missing[0],)
            key = (tool, tuple(a.expr for a in chosen), order)
            caution = cautions.setdefault(key, _Caution(tool, tuple(chosen), order, {}))
            caution.support.setdefault(r.id, (i, st, c))
    base = (
        [f"task_type == {cel_string(runs[0].task_type)}"]
        if runs[0].task_type != default_task_type
        else []
    )
    return [
        _card(
            c,
            base=base,
            group=group,
            wins=wins,
            losses=losses,
            win_calls=win_calls,
            win_steps=win_steps,
        )
        for c in cautions.values()
    ]


def _card(
    c: _Caution,
    *,
    base: list[str],
    group: str,
    wins: Sequence[TrajectoryView],
    losses: Sequence[TrajectoryView],
    win_calls: Mapping[str, Step],
    win_steps: Mapping[Any, Mapping[str, tuple[int, dict[str, Any], Step]]],
) -> DraftCard:
    features = [a.text for a in c.atoms] + [f"before any {t} call" for t in c.order]
    with_atoms = [f"with {', '.join(a.text for a in c.atoms)}"] if c.atoms else []
    order = [f"before any {t} call" for t in c.order]
    what = " ".join([c.tool, *with_atoms, *order]) if features else f"{c.tool} at all"
    if c.order:
        pre_order = [f"!({cel_string(t)} in tools_used)" for t in c.order]
        first = win_calls[c.order[0]]
        steps = [
            ActionStep(
                tool=first.tool or "",
                params_template=template(first.args),
                note="the runs that succeeded called this first",
            ),
            ActionStep(
                tool=c.tool, params_template=template(win_calls[c.tool].args), note="then this call"
            ),
        ]
        handling = f"call {c.order[0]} first, as the runs that succeeded did"
    else:
        pre_order = []
        ok = win_calls.get(c.tool)
        if ok is not None:
            keep = frozenset(a.key for a in c.atoms)
            steps = [
                ActionStep(
                    tool=c.tool,
                    params_template=template(ok.args, keep=keep),
                    note="the runs that succeeded called it like this",
                )
            ]
            handling = "check the arguments: the runs that succeeded called it differently"
        else:
            steps = [
                ActionStep(
                    tool=c.tool,
                    params_template=template(c.support[next(iter(c.support))][2].args),
                    note="the runs that succeeded did not make this call",
                )
            ]
            handling = "check that the call is asked for: the runs that succeeded did not make it"
    runs = {
        rid: RunEvidence(supports=True, confirms=True, outcome="failure", group=group)
        for rid in c.support
    }
    est = estimate(runs)
    contrast = {
        "group": group,
        "failed_runs": sorted(str(r.id) for r in losses),
        "successful_runs": sorted(str(r.id) for r in wins),
        "differed": features,
    }
    evidence = [
        EvidenceTriple(
            trajectory_id=rid,
            step=i,
            condition={k: st[k] for k in (*CONDITION_KEYS, "tools_used") if k in st},
            action={"tool": call.tool, "args": call.args or {}},
            result={
                "outcome": "failure",
                "role": "supports",
                "confirms": True,
                "group": group,  # the failed trials of one task count once (cards.confidence)
                "contrast": contrast,
            },
        )
        for rid, (i, st, call) in sorted(c.support.items(), key=lambda kv: str(kv[0]))
    ]
    # the successful runs it was contrasted with (their call of the tool, else their first
    # call): they explain the card and count neither way in its confidence
    for r in wins:
        steps_of = win_steps.get(r.id, {})
        at = steps_of.get(c.tool) or steps_of.get("")
        i, st, action = 0, {}, {}  # a run that succeeded without any call
        if at is not None:
            i, st = at[0], at[1]
            action = {"tool": at[2].tool, "args": at[2].args or {}}
        evidence.append(
            EvidenceTriple(
                trajectory_id=r.id,
                step=i,
                condition={k: st[k] for k in (*CONDITION_KEYS, "tools_used") if k in st},
                action=action,
                result={"outcome": "success", "role": "contrast", "contrast": contrast},
            )
        )
    mode = f"runs that called {what} failed; runs of the same task that did not, succeeded"
    return DraftCard(
        provenance={"producer": PRODUCER, "confirmed": est.confirmed},
        pattern="contrast_caution",
        scenario=f"Caution before calling {what}",
        preconditions=[
            *base,
            f"tool == {cel_string(c.tool)}",
            *(a.expr for a in c.atoms),
            *pre_order,
        ],
        action_sequence=steps,
        expected_outcome="the task succeeds",
        actual_outcome=(
            f"{len(c.support)} of {len(losses)} failed run(s) made this call; "
            f"none of the {len(wins)} successful run(s) did"
        ),
        failure_modes=[FailureMode(mode=mode, handling=handling)],
        confidence=est.confidence,
        evidence=evidence,
    )
