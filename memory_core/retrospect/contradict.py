"""Contradicting evidence for cautions: successful runs that made a call the caution warns of.

A caution learned from one task ("runs that called X with these features failed") is only as
good as the calls it fires on elsewhere: when a run that succeeded made a matching call, it
counts against the caution (role "contradicts"), so the confidence estimates how often such a
call belongs to a failure instead of how often it was seen in one. Every successful run of a
batch (and of the task groups it touches) is checked against the cautions of the batch and
the live cautions of its namespace, by the same precondition engine that serves them.
A caution new in this batch is also checked against the namespace's stored successful runs
(the latest MAX_SCANNED), so the evidence does not depend on the order runs arrived in, and
re-running a batch adds nothing. A contradicting run's evidence names its task group, so the
successful trials of one task count once against a caution, as the failed trials of one task
count once for it (memory_core.cards.confidence).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from memory_core.cards.confidence import confidence_of
from memory_core.models.card import LIVE_STATUSES, ActionStep, Card, EvidenceTriple, FailureMode
from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.models.trajectory import Outcome, Trajectory, TrajectoryStatus
from memory_core.preconditions import CompiledPrecondition, compile_stored, holds_all, make_context
from memory_core.retrospect.view_cache import VIEWS
from memory_core.task_state import CONDITION_KEYS, states_before_calls

PATTERN = "contrast_caution"
# the cautions checked: the rule contrast's and the LLM contrast's (retrospect.llm_contrast)
PATTERNS = (PATTERN, "contrast_insight")
MAX_SCANNED = 5000  # stored successful runs a new caution is checked against (the latest)
_TOOL = re.compile(r'^tool == "((?:[^"\\]|\\.)*)"$')


@dataclass
class EvidenceFor(DraftCard):
    """Evidence for a stored card: written under the card's own signature, so it adds evidence
    and never a card (the card is live when read; see write_drafts)."""

    stored_signature: str = ""

    @property
    def signature(self) -> str:
        """The stored card's signature."""
        return self.stored_signature

    @property
    def evidence_only(self) -> bool:
        """Evidence for the stored card, never its content."""
        return True


def _tool_of(preconditions: Sequence[str]) -> str | None:
    for p in preconditions:
        m = _TOOL.match(p.strip())
        if m:
            return m.group(1)
    return None


def _stored(engine: Engine, namespace: str) -> list[Card]:
    with Session(engine) as session:
        rows = session.exec(
            select(Card).where(
                col(Card.namespace) == namespace,
                col(Card.status).in_(LIVE_STATUSES),
                col(Card.provenance)["pattern"].as_string().in_(PATTERNS),
            )
        ).all()
        for r in rows:
            session.expunge(r)
        return list(rows)


def contradicting(
    *,
    engine: Engine,
    namespace: str,
    drafts: list[DraftCard],
    wins: Sequence[TrajectoryView],
    groups: Mapping[Any, str] | None = None,
) -> list[DraftCard]:
    """Add contradicting evidence to the batch's caution drafts (in place, confidence redone);
    return evidence-only drafts for the stored cautions that successful runs contradict.
    `groups` names the task group of runs in `wins` (stored runs carry their own)."""
    group_of = dict(groups or {})
    targets: dict[str, list[tuple[list[CompiledPrecondition], Any]]] = defaultdict(list)
    batch_sigs: set[str] = set()
    for d in drafts:
        tool = _tool_of(d.preconditions)
        if d.pattern in PATTERNS and tool is not None and d.signature not in batch_sigs:
            batch_sigs.add(d.signature)
            targets[tool].append(([compile_stored(p) for p in d.preconditions], d))
    stored = _stored(engine, namespace)
    for card in stored:
        tool = _tool_of(card.preconditions)
        if tool is not None and card.signature not in batch_sigs:
            targets[tool].append(([compile_stored(p) for p in card.preconditions], card))
    found: dict[int, list[EvidenceTriple]] = defaultdict(list)
    by_id: dict[int, Any] = {}
    for run in wins:
        _check(run, targets, found, by_id, group_of.get(run.id))
    fresh: dict[str, list[tuple[list[CompiledPrecondition], Any]]] = defaultdict(list)
    live = {c.signature for c in stored}
    for tool, cands in targets.items():
        fresh[tool] = [
            c for c in cands if isinstance(c[1], DraftCard) and c[1].signature not in live
        ]
    if any(fresh.values()):
        seen = {r.id for r in wins}
        for run, group in _stored_wins(engine, namespace):
            if run.id not in seen:
                _check(run, fresh, found, by_id, group)
    extra: list[DraftCard] = []
    for key, triples in found.items():
        target = by_id[key]
        if isinstance(target, DraftCard):
            target.evidence.extend(triples)
            target.confidence = confidence_of((e.trajectory_id, e.result) for e in target.evidence)
        else:
            extra.append(_evidence_for(target, triples))
    return extra


def _stored_wins(engine: Engine, namespace: str) -> list[tuple[TrajectoryView, str | None]]:
    with Session(engine) as session:
        rows = session.exec(
            select(Trajectory)
            .where(
                col(Trajectory.namespace) == namespace,
                col(Trajectory.outcome) == Outcome.success.value,
                col(Trajectory.status) != TrajectoryStatus.dead_letter.value,
            )
            .order_by(col(Trajectory.created_at).desc(), col(Trajectory.id))
            .limit(MAX_SCANNED)
        ).all()
        return [(VIEWS.view(r), r.task_group) for r in rows]


def _check(
    run: TrajectoryView,
    targets: dict[str, list[tuple[list[CompiledPrecondition], Any]]],
    found: dict[int, list[EvidenceTriple]],
    by_id: dict[int, Any],
    group: str | None,
) -> None:
    """Contradicting evidence from one successful run for every target one of its calls meets."""
    calls = [s for s in run.steps if s.type == "tool_call" and s.tool]
    states = states_before_calls(calls, task_type=run.task_type, agent_id=run.agent_id)
    hit: set[int] = set()
    for i, (call, state) in enumerate(zip(calls, states, strict=True)):
        cands = targets.get(call.tool or "")
        if not cands:
            continue
        ctx, keys = make_context(state), frozenset(state)
        for compiled, target in cands:
            if id(target) in hit or not holds_all(compiled, ctx, keys):
                continue
            hit.add(id(target))  # one contradiction per run and caution
            by_id[id(target)] = target
            found[id(target)].append(
                EvidenceTriple(
                    trajectory_id=run.id,
                    step=i,
                    condition={k: state[k] for k in (*CONDITION_KEYS, "tools_used")},
                    action={"tool": call.tool, "args": call.args or {}},
                    result={"outcome": "success", "role": "contradicts"}
                    | ({"group": group} if group else {}),
                )
            )


def _evidence_for(card: Card, triples: list[EvidenceTriple]) -> DraftCard:
    return EvidenceFor(
        pattern=str(card.provenance.get("pattern", PATTERN)),
        scenario=card.scenario,
        preconditions=list(card.preconditions),
        action_sequence=[ActionStep.model_validate(a) for a in card.action_sequence],
        expected_outcome=card.expected_outcome,
        actual_outcome=card.actual_outcome,
        failure_modes=[FailureMode.model_validate(m) for m in card.failure_modes],
        confidence=card.confidence,
        evidence=triples,
        provenance=dict(card.provenance),
        stored_signature=card.signature,
    )
