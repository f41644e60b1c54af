"""Turn the contrast prompt's cards into drafts, grounded in the trials they cite.

A card is kept only when what it cites exists: the failed trial and its call at the cited
step, the successful trial it is contrasted with (else rejected, with the reason). It then
passes the checks of every LLM card (memory_core.retrospect.grounding: preconditions compile
and hold on some state of the trials, action tools were called there, no instruction-like
text) and one more: its preconditions hold on the state just before the cited call.

Evidence, like the rule contrast's (memory_core.retrospect.contrast): the cited failed call
supports it; every other run of the group, shown in the prompt or not, is checked against the
preconditions (a failed run with a matching call supports it, a successful one contradicts
it, a shown successful trial without one is kept beside the card as a contrast), so the
evidence depends on the group's stored runs, not on which of them the prompt had room for
or which batch brought them. The confidence is the evidence estimate
(memory_core.cards.confidence), never the model's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.cards.confidence import estimate, runs_of
from memory_core.errors import InvalidPrecondition
from memory_core.models.card import CardStatus, EvidenceTriple, FailureMode
from memory_core.models.drafts import DraftCard, TrajectoryView
from memory_core.models.trajectory import Outcome, Step
from memory_core.preconditions import compile_all, holds_all, make_context
from memory_core.retrospect.grounding import check_grounding
from memory_core.retrospect.llm_answers import ContrastCard
from memory_core.screen.exposure import exposures
from memory_core.screen.gate import reasons
from memory_core.screen.taint import tainted_calls
from memory_core.task_state import CONDITION_KEYS, planning_state, states_before_calls

PRODUCER = "llm-contrast"
PATTERN = "contrast_insight"


@dataclass(frozen=True)
class Trial:
    """One run as the prompt showed it: its label (F1, S2...) and view."""

    label: str
    view: TrajectoryView

    @property
    def calls(self) -> list[Step]:
        """The run's tool calls, in order."""
        return [s for s in self.view.steps if s.type == "tool_call" and s.tool]

    def states(self) -> list[dict[str, Any]]:
        """The pre-call state of each call (index = call ordinal)."""
        v = self.view
        return states_before_calls(self.calls, task_type=v.task_type, agent_id=v.agent_id)


def _condition(state: Mapping[str, Any]) -> dict[str, Any]:
    return {k: state[k] for k in (*CONDITION_KEYS, "tools_used") if k in state}


def _texts(card: ContrastCard) -> list[str]:
    out = [card.scenario, card.expected_outcome, card.actual_outcome, card.difference, card.reason]
    out += [a.note for a in card.action_sequence]
    out += [str(v) for a in card.action_sequence for v in a.params_template.values()]
    return out + [f"{f.mode} {f.handling}" for f in card.failure_modes]


def _cited(card: ContrastCard, trials: Mapping[str, Trial]) -> tuple[int, str | None]:
    """The ordinal of the cited call in the failed trial, or why the citation is bad."""
    failed, won = trials.get(card.failed_trial), trials.get(card.successful_trial)
    if failed is None or failed.view.outcome is not Outcome.failure:
        return -1, f"cites {card.failed_trial!r}, which is not a failed trial it was shown"
    if won is None or won.view.outcome is not Outcome.success:
        return -1, f"cites {card.successful_trial!r}, which is not a successful trial it was shown"
    for i, call in enumerate(failed.calls):
        if call.index == card.step:
            return i, None
    return -1, f"cites step {card.step} of {card.failed_trial}, which is not a call of that trial"


def _holds(compiled: list[Any], state: Mapping[str, Any]) -> bool:
    return any(
        holds_all(compiled, make_context(dict(s)), frozenset(s))
        for s in (state, planning_state(dict(state)))
    )


def _row(
    t: TrajectoryView,
    states: list[dict[str, Any]],
    calls: list[Step],
    i: int,
    result: dict[str, Any],
) -> EvidenceTriple:
    state = states[i] if i < len(states) else {}
    call = calls[i] if i < len(calls) else None
    return EvidenceTriple(
        trajectory_id=t.id,
        step=i,
        condition=_condition(state),
        action={"tool": call.tool, "args": call.args or {}} if call else {},
        result=result,
    )


def _first_hit(compiled: list[Any], states: list[dict[str, Any]]) -> int | None:
    return next(
        (i for i, s in enumerate(states) if holds_all(compiled, make_context(s), frozenset(s))),
        None,
    )


def _evidence(
    compiled: list[Any],
    trials: Mapping[str, Trial],
    others: Sequence[TrajectoryView],
    card: ContrastCard,
    at: int,
    shared: dict[str, Any],
) -> list[EvidenceTriple]:
    """The cited failed call supports the card; every other run of the group (shown or not)
    is matched against it, so the evidence is a function of the group's stored runs."""
    out: list[EvidenceTriple] = []
    for label, t in sorted(trials.items()):
        states, calls = t.states(), t.calls
        hit = at if label == card.failed_trial else _first_hit(compiled, states)
        if hit is not None and t.view.outcome is Outcome.failure:
            result = {"outcome": "failure", "role": "supports", "confirms": True}
        elif hit is not None and t.view.outcome is Outcome.success:
            result = {"outcome": "success", "role": "contradicts"}
        elif t.view.outcome is Outcome.success:  # shown beside the card: counts neither way
            tools = {a.tool for a in card.action_sequence}
            hit = next((i for i, c in enumerate(calls) if c.tool in tools), 0 if calls else None)
            result = {"outcome": "success", "role": "contrast"}
        else:
            continue
        # the group's trials count once for or against it (memory_core.cards.confidence)
        result = {**result, "trial": label, "group": shared["group"], "contrast": shared}
        out.append(_row(t.view, states, calls, hit or 0, result))
    for v in others:  # the group's runs the prompt had no room for: only a matching call counts
        t = Trial("", v)
        states = t.states()
        hit = _first_hit(compiled, states)
        if hit is None or v.outcome not in (Outcome.success, Outcome.failure):
            continue
        won = v.outcome is Outcome.success
        result = (
            {"outcome": "success", "role": "contradicts"}
            if won
            else {"outcome": "failure", "role": "supports", "confirms": True}
        )
        out.append(
            _row(v, states, t.calls, hit, {**result, "group": shared["group"], "contrast": shared})
        )
    return out


def contrast_drafts(
    *,
    answers: Sequence[ContrastCard],
    trials: Sequence[Trial],
    others: Sequence[TrajectoryView] = (),
    group: str,
    provenance: Mapping[str, Any],
    screen: bool = True,
    known_tools: frozenset[str] = frozenset(),
) -> list[DraftCard]:
    """Drafts from the contrast answer: grounded, rejected (bad citation, untrue preconditions)
    or quarantined (tools never called, injected text, a trial that carries an injection)."""
    by_label = {t.label: t for t in trials}
    views = [t.view for t in trials]
    exposed = [f"trial {t.label}, {e}" for t in trials for e in exposures(t.view.steps)]
    drafts = []
    for card in answers:
        at, bad = _cited(card, by_label)
        verdict = check_grounding(
            preconditions=card.preconditions,
            tools=[a.tool for a in card.action_sequence],
            texts=_texts(card),
            views=views,
            known_tools=known_tools,
        )
        flags, status = list(verdict.flags), verdict.status
        try:
            compiled = compile_all(list(card.preconditions))
        except InvalidPrecondition:
            compiled = []  # check_grounding rejected it with the reason
        if bad:
            status, flags = CardStatus.rejected, [*flags, bad]
        elif not card.preconditions:
            status = CardStatus.rejected
            flags.append("no preconditions: it would apply to every call")
        elif compiled and not _holds(compiled, by_label[card.failed_trial].states()[at]):
            status = CardStatus.rejected
            flags.append(f"its preconditions do not hold at the call it cites ({card.step})")
        if screen and status is not CardStatus.rejected:
            failed = by_label[card.failed_trial]
            if failed.calls[at].index in tainted_calls(failed.view.steps):
                flags.append(f"the cited call of {card.failed_trial} was made on an injected order")
            if exposed:  # an obedient model restates what it read, in any words
                flags.append(f"instruction-like content in a trial the LLM read ({exposed[0]})")
            # kept in the provenance, outside the card texts the writer screens
            flags += reasons([card.difference, card.reason])
            if flags:
                status = CardStatus.quarantined
        ids = {t.label: str(t.view.id) for t in trials}
        shared = {
            "group": group,
            "failed_runs": sorted(ids[t.label] for t in trials if t.label.startswith("F")),
            "successful_runs": sorted(ids[t.label] for t in trials if t.label.startswith("S")),
            "differed": card.difference,
            "reason": card.reason,
        }
        evidence = _evidence(compiled, by_label, others, card, at, shared) if not bad else []
        est = estimate(runs_of((e.trajectory_id, e.result) for e in evidence))
        modes = card.failure_modes or [FailureMode(mode=card.difference, handling=card.reason)]
        drafts.append(
            DraftCard(
                pattern=PATTERN,
                scenario=card.scenario,
                preconditions=list(card.preconditions),
                action_sequence=list(card.action_sequence),
                expected_outcome=card.expected_outcome,
                actual_outcome=card.actual_outcome or f"{card.difference}: {card.reason}",
                failure_modes=list(modes),
                confidence=est.confidence if evidence else 0.0,
                evidence=evidence,
                provenance={
                    **provenance,
                    "group": group,
                    "confirmed": est.confirmed,
                    "difference": card.difference,
                    "reason": card.reason,
                    "cites": {
                        "failed": ids.get(card.failed_trial, card.failed_trial),
                        "step": card.step,
                        "successful": ids.get(card.successful_trial, card.successful_trial),
                    },
                    "stated_confidence": card.confidence,
                },
                status=status,
                flags=flags,
                answer=card.model_dump_json(),
            )
        )
    return drafts
