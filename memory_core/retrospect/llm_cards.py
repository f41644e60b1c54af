"""Turn LLM card answers into drafts, checked: compiled, grounded in the run, not injected."""

from __future__ import annotations

import re
from typing import Any

from memory_core.errors import InvalidPrecondition
from memory_core.models.card import CardStatus, EvidenceTriple
from memory_core.preconditions import compile_all, holds_all, make_context
from memory_core.retrospect.drafts import DraftCard, TrajectoryView
from memory_core.retrospect.llm_answers import CardAnswer, DecisionPoint
from memory_core.task_state import CONDITION_KEYS, planning_state, states_before_calls

# instruction-like text that has no business inside advice distilled from a run
_INJECTION = re.compile(
    r"ignore (all |any |the )?(previous|prior|above|earlier) (instructions|rules)"
    r"|disregard (all |the )?(previous|prior|above|system)"
    r"|(new|updated) (system )?instructions?\s*:"
    r"|you (must|should) (now )?always"
    r"|system prompt",
    re.IGNORECASE,
)


def _texts(card: CardAnswer) -> list[str]:
    out = [card.scenario, card.expected_outcome, card.actual_outcome]
    out += [a.note for a in card.action_sequence]
    out += [str(v) for a in card.action_sequence for v in a.params_template.values()]
    out += [f"{f.mode} {f.handling}" for f in card.failure_modes]
    return out


def _state_at(states: list[dict[str, Any]], view: TrajectoryView, step: int) -> dict[str, Any]:
    """The pre-call state of the first tool call at or after message index `step`."""
    ordinal = 0
    for s in view.steps:
        if s.type == "tool_call" and s.tool:
            if s.index >= step:
                return states[min(ordinal, len(states) - 1)]
            ordinal += 1
    return states[-1]


def to_drafts(
    *,
    answers: list[CardAnswer],
    points: list[DecisionPoint],
    view: TrajectoryView,
    provenance: dict[str, Any],
    known_tools: frozenset[str] = frozenset(),
) -> list[DraftCard]:
    """Drafts from card answers: active, quarantined (injection, tools never called) or rejected."""
    states = states_before_calls(view.steps, task_type=view.task_type, agent_id=view.agent_id)
    called = {s.tool for s in view.steps if s.type == "tool_call" and s.tool}
    drafts = []
    for card in answers:
        flags: list[str] = []
        status: CardStatus | None = None
        try:
            compiled = compile_all(card.preconditions)
        except InvalidPrecondition as exc:
            compiled, status = [], CardStatus.rejected
            flags.append(str(exc))
        if compiled and states:
            candidates = states + [planning_state(s) for s in states]
            if not any(holds_all(compiled, make_context(s), frozenset(s)) for s in candidates):
                status = CardStatus.rejected
                flags.append("its preconditions hold on no state of the run it came from")
        strangers = sorted({a.tool for a in card.action_sequence} - called - known_tools)
        if strangers:
            flags.append(f"action tool(s) {', '.join(strangers)} never called in the source run")
        if any(_INJECTION.search(t) for t in _texts(card)):
            flags.append("instruction-like text from the run found in the card")
        if flags and status is None:
            status = CardStatus.quarantined
        point = points[card.point] if card.point < len(points) else None
        state = _state_at(states, view, point.step) if point and states else {}
        drafts.append(
            DraftCard(
                pattern="llm",
                scenario=card.scenario,
                preconditions=card.preconditions,
                action_sequence=card.action_sequence,
                expected_outcome=card.expected_outcome,
                actual_outcome=card.actual_outcome,
                failure_modes=card.failure_modes,
                confidence=card.confidence,
                evidence=[
                    EvidenceTriple(
                        trajectory_id=view.id,
                        step=int(state.get("step", 0)),
                        condition={k: state[k] for k in CONDITION_KEYS if k in state},
                        action={"decision": point.action} if point else {},
                        result={
                            "outcome": view.outcome.value,
                            **({"decision_outcome": point.outcome} if point else {}),
                        },
                    )
                ],
                provenance=provenance,
                status=status,
                flags=flags,
            )
        )
    return drafts
