"""Contrast of final answers: what the successful trials of a task did before answering that a
failed trial did not.

In a domain without tool errors (question answering with a search tool) a run fails by giving
a wrong final answer; the call that gave it succeeded. Beside the successful trials of the
same task, such a failure is a lesson about what the agent did *before* answering: it
answered without a lookup every successful trial made (read the evidence), or after fewer
calls than any of them (one search where they searched more). The lesson is keyed on that
shape of the state (`!("read" in tools_used)`, `step < 2` when the answer is about to be
given), so it fires on the next question answered the same way, whatever the answer is.

Which tool gives the final answer is read from the data, never from its name: the tool that
ends (nearly) every successful run of the namespace, called once in each. A card about that
tool never keys on its arguments: an answer's value ("yes", a date) is one question's, and a
caution keyed on it would fire on every question answered the same way
(`keys_on_answer`, which the contrast stage applies to every caution it writes).

Cards carry the evidence shape of the other contrast cautions (memory_core.retrospect.contrast):
the failed runs support it, the successful runs of the task are shown beside them, every run
names its task group, so the serving gate counts tasks, not trials, and backtests the card as
a caution on the run's outcome.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from memory_core.cards.confidence import RunEvidence, estimate
from memory_core.models.card import ActionStep, EvidenceTriple, FailureMode
from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.models.trajectory import Outcome, Step, Trajectory, TrajectoryStatus
from memory_core.retrospect.call_features import cel_string, template
from memory_core.retrospect.view_cache import VIEWS
from memory_core.task_state import CONDITION_KEYS, states_before_calls

PATTERN = "contrast_caution"  # read by the gate and the contradiction check as a caution
PRODUCER = "contrast_answers"
FINAL_SHARE = 0.9  # share of successful runs that must end with the tool
MIN_FINAL_GROUPS = 3  # task groups whose successful runs end with it
ANSWER_SPREAD = 0.9  # distinct values per task group of an argument that carries the answer
MAX_SCANNED = 5000  # the newest successful runs of a namespace the final tool is read from
MAX_SHOWN_STEPS = 4  # steps of a successful trial a card shows
# a reading of the call's arguments: args.k, args["k"], or args whole (group 1 or 2: k)
_ARGS = re.compile(r"""\bargs\b(?:\s*\.\s*([A-Za-z_]\w*)|\s*\[\s*["']([^"']*)["']\s*\])?""")
_TOOL = re.compile(r'^\s*tool\s*==\s*"((?:[^"\\]|\\.)*)"\s*$')


def _calls(v: TrajectoryView) -> list[Step]:
    return [s for s in v.steps if s.type == "tool_call" and s.tool]


@dataclass(frozen=True)
class FinalAnswer:
    """The tool that gives a run's final answer, and its arguments that carry the answer."""

    tool: str
    keys: frozenset[str]


def final_answer(runs: Iterable[tuple[TrajectoryView, str]]) -> FinalAnswer | None:
    """The final answer of a namespace's (run, task group) pairs, read from its successful runs.

    The tool is the last call of at least FINAL_SHARE of them, called once in each, over at
    least MIN_FINAL_GROUPS task groups; its answer arguments are those whose values differ from
    task to task (distinct values for at least ANSWER_SPREAD of the groups): an answer depends
    on its question, where a choice among a few values (a mode, a cabin) recurs. Without such
    an argument the tool is an action like any other (None)."""
    ends: Counter[str] = Counter()
    last: list[tuple[str, Step]] = []
    wins = 0
    for r, group in runs:
        if r.outcome is not Outcome.success:
            continue
        calls = _calls(r)
        wins += 1
        if calls and sum(c.tool == calls[-1].tool for c in calls) == 1:
            ends[calls[-1].tool or ""] += 1
            last.append((group, calls[-1]))
    if not ends:
        return None
    tool, n = ends.most_common(1)[0]
    groups = {g for g, c in last if c.tool == tool}
    if n < FINAL_SHARE * wins or len(groups) < MIN_FINAL_GROUPS:
        return None
    values: dict[str, set[str]] = defaultdict(set)
    for _, c in last:
        if c.tool == tool:
            for k, v in (c.args or {}).items():
                values[k].add(json.dumps(v, sort_keys=True).casefold())
    keys = frozenset(k for k, vs in values.items() if len(vs) >= ANSWER_SPREAD * len(groups))
    return FinalAnswer(tool, keys) if keys else None


def stored_final_answers(
    engine: Engine, namespaces: Iterable[str]
) -> dict[str, FinalAnswer | None]:
    """The final answer of each namespace, read from its stored successful runs."""
    out: dict[str, FinalAnswer | None] = {}
    with Session(engine) as session:
        for ns in sorted(set(namespaces)):
            rows = session.exec(
                select(Trajectory)
                .where(
                    col(Trajectory.namespace) == ns,
                    col(Trajectory.outcome) == Outcome.success.value,
                    col(Trajectory.status) != TrajectoryStatus.dead_letter.value,
                )
                .order_by(col(Trajectory.created_at).desc(), col(Trajectory.id))
                .limit(MAX_SCANNED)
            ).all()
            views = []
            for r in rows:
                try:
                    views.append((VIEWS.view(r), r.task_group or f"run:{r.id}"))
                except ValidationError:
                    continue  # a run whose steps do not parse is parked by its own extraction
            out[ns] = final_answer(views)
    return out


def without_answer_keys(drafts: Sequence[DraftCard], final: FinalAnswer | None) -> list[DraftCard]:
    """The drafts that do not key on the final answer (evidence for a stored card is kept:
    it adds to that card, never a key)."""
    return [d for d in drafts if d.evidence_only or not keys_on_answer(d, final)]


def card_tool(preconditions: Sequence[str]) -> str | None:
    """The tool a card's `tool == "..."` precondition names, if any."""
    for p in preconditions:
        m = _TOOL.match(p)
        if m:
            return str(m.group(1))
    return None


def keys_on_answer(draft: DraftCard, final: FinalAnswer | None) -> bool:
    """Whether a card about the final-answer tool reads an answer argument of that call (or
    the arguments as a whole, which hold the answer)."""
    if final is None or card_tool(draft.preconditions) != final.tool:
        return False
    for p in draft.preconditions:
        for m in _ARGS.finditer(p):
            named = m.group(1) or m.group(2)
            if named is None or named in final.keys:
                return True
    return False


@dataclass
class _Lesson:
    kind: str  # "before": a tool every success called first; "fewer": fewer calls
    value: str | int  # the tool, or the call count the answer came before
    support: dict[Any, tuple[int, dict[str, Any], Step]] = field(default_factory=dict)


def answer_cautions(
    runs: Sequence[TrajectoryView],
    *,
    group: str,
    final: FinalAnswer | None,
    default_task_type: str = "default",
    tainted_of: Callable[[TrajectoryView], Collection[int]] | None = None,
) -> list[DraftCard]:
    """Cautions on the final answers of a task's failed runs, keyed on what the successful
    runs of the task had done before answering (empty without a final tool, a success or a
    failed answer)."""
    if final is None:
        return []
    tool = final.tool
    wins, losses = [], []
    # in id order: the trial a card shows must not depend on the order the database returned
    for r in sorted(runs, key=lambda v: str(v.id)):
        calls = _calls(r)
        if calls and calls[-1].tool == tool and not calls[-1].error:
            states = states_before_calls(calls, task_type=r.task_type, agent_id=r.agent_id)
            if r.outcome is Outcome.success:
                wins.append((r, calls, states[-1]))
            elif r.outcome is Outcome.failure:
                losses.append((r, calls, states[-1]))
    if not wins or not losses:
        return []
    # tools every successful run called before answering, and the fewest calls any made
    before = set.intersection(*(set(st["tools_used"]) for _, _, st in wins)) - {tool}
    fewest = min(int(st["step"]) for _, _, st in wins)
    lessons: dict[tuple[str, str | int], _Lesson] = {}
    for r, calls, st in losses:
        if tainted_of is not None and calls[-1].index in tainted_of(r):
            continue  # an answer given on an order in untrusted text teaches nothing
        at = (len(calls) - 1, st, calls[-1])
        # each shape it differs in is its own lesson (a run may teach both): the gate and the
        # backtest judge which holds on other questions
        keys: list[tuple[str, str | int]] = []
        missing = sorted(before - set(st["tools_used"]))
        if missing:
            keys.append(("before", missing[0]))
        if int(st["step"]) < fewest:
            keys.append(("fewer", int(st["step"]) + 1))
        for key in keys:  # none: it looked as far as a successful trial did
            lessons.setdefault(key, _Lesson(*key)).support.setdefault(r.id, at)
    task_type = runs[0].task_type
    base = [f"task_type == {cel_string(task_type)}"] if task_type != default_task_type else []
    return [
        _card(x, final=tool, base=base, group=group, wins=wins, losses=losses)
        for x in lessons.values()
    ]


def _shown(calls: Sequence[Step], final: str) -> list[ActionStep]:
    """A successful trial's calls before its answer, as argument shapes (never values)."""
    before = [c for c in calls[:-1]][-MAX_SHOWN_STEPS + 1 :]
    steps = [
        ActionStep(tool=c.tool or "", params_template=template(c.args), note="a successful trial")
        for c in before
    ]
    steps.append(
        ActionStep(tool=final, params_template=template(calls[-1].args), note="then answer")
    )
    return steps


def _condition(st: dict[str, Any]) -> dict[str, Any]:
    return {k: st[k] for k in (*CONDITION_KEYS, "tools_used") if k in st}


def _card(
    x: _Lesson,
    *,
    final: str,
    base: list[str],
    group: str,
    wins: Sequence[tuple[TrajectoryView, list[Step], dict[str, Any]]],
    losses: Sequence[tuple[TrajectoryView, list[Step], dict[str, Any]]],
) -> DraftCard:
    if x.kind == "before":
        tool = str(x.value)
        key = f"!({cel_string(tool)} in tools_used)"
        what = f"{final} before any {tool} call"
        mode = (
            f"final answers given before any {tool} call failed; "
            f"trials of the same task that called {tool} first succeeded"
        )
        handling = f"call {tool} before answering, as the successful trials did"
        shown = next(c for _, c, _ in wins if any(s.tool == tool for s in c[:-1]))
    else:
        key = f"step < {x.value}"
        what = f"{final} after fewer than {x.value} calls"
        mode = (
            f"final answers given after fewer than {x.value} calls failed; "
            "trials of the same task that looked further first succeeded"
        )
        handling = "look further before answering, as the successful trials did"
        shown = max((c for _, c, _ in wins), key=len)
    runs = {
        rid: RunEvidence(supports=True, confirms=True, outcome="failure", group=group)
        for rid in x.support
    }
    est = estimate(runs)
    contrast = {
        "group": group,
        "failed_runs": sorted(str(r.id) for r, _, _ in losses),
        "successful_runs": sorted(str(r.id) for r, _, _ in wins),
        "differed": [what],
    }
    evidence = [
        EvidenceTriple(
            trajectory_id=rid,
            step=i,
            condition=_condition(st),
            action={"tool": call.tool, "args": call.args or {}},
            result={
                "outcome": "failure",
                "role": "supports",
                "confirms": True,
                "group": group,
                "contrast": contrast,
            },
        )
        for rid, (i, st, call) in sorted(x.support.items(), key=lambda kv: str(kv[0]))
    ]
    for r, calls, st in wins:  # shown beside: they explain the card, count neither way
        evidence.append(
            EvidenceTriple(
                trajectory_id=r.id,
                step=len(calls) - 1,
                condition=_condition(st),
                action={"tool": final, "args": calls[-1].args or {}},
                result={"outcome": "success", "role": "contrast", "contrast": contrast},
            )
        )
    made = sorted(int(st["step"]) for _, _, st in wins)
    return DraftCard(
        provenance={"producer": PRODUCER, "confirmed": est.confirmed},
        pattern=PATTERN,
        scenario=f"Caution before answering with {what}",
        preconditions=[*base, f"tool == {cel_string(final)}", key],
        action_sequence=_shown(shown, final),
        expected_outcome="the answer is right",
        actual_outcome=(
            f"{len(x.support)} of {len(losses)} failed answer(s) of the task were given this way; "
            f"its {len(wins)} successful trial(s) made {made[0]} to {made[-1]} calls first"
        ),
        failure_modes=[FailureMode(mode=mode, handling=handling)],
        confidence=est.confidence,
        evidence=evidence,
    )
