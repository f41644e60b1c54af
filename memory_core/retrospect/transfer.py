"""Warnings that transfer: an error that comes with an argument feature, on any tool taking it.

When the calls that failed with an error are told apart from the tool's other calls by an
argument feature (memory_core.retrospect.selective: a payment kind, a mode word, a list
size), the lesson is about the feature as much as the tool: another tool taking the same
argument in the same form may fail the same way. So each such (error, feature) also becomes
a feature-keyed caution: its preconditions are the feature and "not one of the tools it was
seen on" (those have their own warning), it says on which tools it was seen, and its
evidence is those failing calls.

It stands below a tool-specific warning: its confidence is the evidence estimate minus
PENALTY (memory_core.cards.confidence: Beta over the supporting runs), so at equal evidence a
confirmed tool-specific lesson ranks first; and it never fires on the tools whose own cards
already warn of the error.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from sqlmodel import Session, col, select

from memory_core.cards.confidence import RunEvidence, estimate
from memory_core.models.card import ActionStep, EvidenceTriple, FailureMode
from memory_core.models.drafts import DraftCard
from memory_core.models.trajectory import Trajectory, TrajectoryStatus
from memory_core.retrospect.call_features import Atom, cel_string, template
from memory_core.retrospect.selective import (
    PATTERN as WARNING,
)
from memory_core.retrospect.selective import (
    Call,
    Calls,
    Selection,
    calls_of,
    narrow,
    task_base,
)
from memory_core.retrospect.view_cache import VIEWS

PATTERN = "transferred_warning"
PRODUCER = "selective-transfer"
PENALTY = 0.15  # below the tool-specific card at equal evidence (score weight 0.4: 0.06)
VALUE_KINDS = frozenset({"word", "bool", "size", "pattern", "sign"})  # not a key's presence
MAX_SCANNED = 5000  # the namespace's latest stored runs whose calls are compared


def refine_warnings(
    *, session: Session, namespace: str, drafts: Sequence[DraftCard]
) -> list[DraftCard]:
    """The batch's rule warnings narrowed to the calls their error comes with (in place), and
    the feature-keyed cautions that carry them to other tools: the drafts to add."""
    if not any(d.pattern == WARNING for d in drafts):
        return []
    rows = session.exec(
        select(Trajectory)
        .where(
            col(Trajectory.namespace) == namespace,
            col(Trajectory.status) != TrajectoryStatus.dead_letter.value,
        )
        .order_by(col(Trajectory.created_at).desc(), col(Trajectory.id))
        .limit(MAX_SCANNED)
    ).all()
    calls = calls_of(VIEWS.view(r) for r in rows)
    return transferred(narrow(drafts, calls), calls)


def transferred(
    selections: Mapping[tuple[str, str, str], Selection],
    calls: Calls,
    *,
    default_task_type: str = "default",
) -> list[DraftCard]:
    """A feature-keyed caution per (task type, error, first value feature) of the selections."""
    tools: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    feature: dict[tuple[str, str, str], Atom] = {}
    for (task_type, tool, error), sel in sorted(selections.items()):
        first = next((a for a in sel.atoms if a.kind in VALUE_KINDS), None)
        if first is None:
            continue
        key = (task_type, error, first.expr)
        tools[key].add(tool)
        feature[key] = first
    out = []
    for key in sorted(tools):
        task_type, error, expr = key
        seen_on = sorted(tools[key])
        failing = [
            (tool, c)
            for tool in seen_on
            for c in calls.by_tool.get((task_type, tool), [])
            if c.error == error and expr in c.features
        ]
        if failing:
            out.append(
                _card(
                    task_base(task_type, default_task_type), error, feature[key], seen_on, failing
                )
            )
    return out


def _card(
    base: list[str], error: str, atom: Atom, seen_on: list[str], failing: list[tuple[str, Call]]
) -> DraftCard:
    where = ", ".join(seen_on)
    runs = {c.run: RunEvidence(supports=True, confirms=True, outcome=c.outcome) for _, c in failing}
    est = estimate(runs)
    evidence = [
        EvidenceTriple(
            trajectory_id=c.run,
            step=c.step,
            condition=dict(c.condition),
            action={"tool": tool, "args": dict(c.args)},
            result={
                "error_signature": error,
                "outcome": c.outcome,
                "role": "supports",
                "confirms": True,
                "transferred_from": seen_on,
                "feature": atom.expr,
            },
        )
        for tool, c in sorted(failing, key=lambda tc: (str(tc[1].run), tc[1].step))
    ]
    example = failing[0]
    handling = (
        f"seen on {where} with {atom.text}: check {atom.key} before calling any other tool with it"
    )
    exclude = "[" + ", ".join(cel_string(t) for t in seen_on) + "]"
    return DraftCard(
        provenance={
            "producer": PRODUCER,
            "confirmed": est.confirmed,
            "transferred_from": seen_on,
            "feature": atom.expr,
        },
        pattern=PATTERN,
        scenario=f'Calls with {atom.text} can fail with "{error}" (seen on {where})',
        preconditions=[*base, atom.expr, f"!(tool in {exclude})"],
        action_sequence=[
            ActionStep(
                tool=example[0],
                params_template=template(dict(example[1].args), keep=frozenset({atom.key})),
                note=f"failed like this on {example[0]}: check {atom.key} first",
            )
        ],
        expected_outcome="the call succeeds",
        actual_outcome=(
            f'{len(failing)} call(s) with {atom.text} failed with "{error}" in '
            f"{len(runs)} run(s), on {where}"
        ),
        failure_modes=[FailureMode(mode=error, handling=handling)],
        confidence=max(est.confidence - PENALTY, 0.0),
        evidence=evidence,
        signature_parts=(error,),
    )
