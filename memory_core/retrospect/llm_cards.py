"""Turn LLM card answers into drafts, checked: compiled, grounded in the run, not injected."""

from __future__ import annotations

from typing import Any

from memory_core.models.card import EvidenceTriple
from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.retrospect.grounding import check_grounding
from memory_core.retrospect.llm_answers import CardAnswer, DecisionPoint
from memory_core.task_state import CONDITION_KEYS, states_before_calls


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
    drafts = []
    for card in answers:
        # the same checks as regenerated drafts and judged merges (memory_core.retrospect.grounding)
        verdict = check_grounding(
            preconditions=card.preconditions,
            tools=[a.tool for a in card.action_sequence],
            texts=_texts(card),
            views=[view],
            known_tools=known_tools,
        )
        flags, status = verdict.flags, verdict.status
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
                answer=card.model_dump_json(),
            )
        )
    return drafts
