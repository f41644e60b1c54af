"""The rule extractor: decision points (errors, retries, recoveries, outcomes) turned into cards.

It knows nothing about any particular agent: it reads tool names, arguments and error texts
from the trajectory and writes them into preconditions and action steps as data.
"""

from __future__ import annotations

from typing import Any

from memory_core.cards.confidence import confidence_of
from memory_core.models.card import ActionStep, EvidenceTriple, FailureMode
from memory_core.models.drafts import DraftCard, Extraction, TrajectoryView
from memory_core.models.trajectory import Outcome, Step
from memory_core.retrospect.call_features import cel_string, template
from memory_core.retrospect.recovery import Recovery, find_recovery, params_template, separating
from memory_core.task_state import CONDITION_KEYS, error_signature, states_before_calls


class RuleExtractor:
    """Deterministic extraction from structured trajectories; works offline, needs no model."""

    name = "rule-extractor"

    def __init__(self, *, default_task_type: str = "default", max_actions: int = 8):
        self.default_task_type = default_task_type
        self.max_actions = max_actions

    def extract(self, trajectory: TrajectoryView) -> Extraction:
        """Cards for every error (warning + recovery) and for a successful run's path."""
        return Extraction(drafts=self.drafts(trajectory))

    def drafts(self, trajectory: TrajectoryView) -> list[DraftCard]:
        """The drafts alone."""
        calls = [s for s in trajectory.steps if s.type == "tool_call" and s.tool]
        states = states_before_calls(
            calls, task_type=trajectory.task_type, agent_id=trajectory.agent_id
        )
        base = (
            [f"task_type == {cel_string(trajectory.task_type)}"]
            if trajectory.task_type != self.default_task_type
            else []
        )
        drafts: list[DraftCard] = []
        seen: dict[tuple[str, str], DraftCard] = {}
        for i, call in enumerate(calls):
            if not call.error or call.tool is None:
                continue
            sig = error_signature(call.error, call.args)
            rec = find_recovery(calls, i, sig, max_actions=self.max_actions)
            first = seen.get((call.tool, sig))
            if first is not None:
                # the same failure again in one run is one lesson, not two, and one run of
                # its confidence (memory_core.cards.confidence counts runs); each occurrence
                # is a row of its evidence, so how often the error recurs shows in the count
                first.evidence.append(
                    self._evidence(trajectory, states[i], call, sig, rec, confirms=True)
                )
                continue
            seen[(call.tool, sig)] = self._warning(trajectory, base, call, states[i], sig, rec)
            drafts.append(seen[(call.tool, sig)])
            if rec.retry is not None and trajectory.outcome is Outcome.success:
                # a recovery is a fix: only a run that then succeeded shows one
                drafts.append(self._recovery_card(trajectory, base, call, states[i + 1], sig, rec))
        if trajectory.outcome is Outcome.success and base and calls:
            drafts.append(self._success_path(trajectory, base, calls, states[0]))
        return drafts

    def _actions(self, failed: Step, rec: Recovery, *, fixed: bool) -> list[ActionStep]:
        """A fix (what preceded the retry, the retry as it succeeded) only from a run that then
        succeeded; otherwise a caution: the failed call, and no step to take instead."""
        if rec.retry is None or not fixed:
            note = "this call failed before: check its inputs before calling; " + (
                "a retry succeeded only in a run that failed anyway, so no fix is known"
                if rec.retry is not None
                else "no run showed what works"
            )
            return [
                ActionStep(
                    tool=failed.tool or "", params_template=params_template(failed.args), note=note
                )
            ]
        steps = [
            ActionStep(
                tool=s.tool or "",
                params_template=params_template(s.args),
                note="gather what the retry needs",
            )
            for s in rec.between
        ]
        note = (
            "this call succeeded: " + "; ".join(rec.how)
            if rec.how
            else "this call succeeded with the same arguments"
        )
        steps.append(
            ActionStep(
                tool=rec.retry.tool or "",
                params_template=template(rec.retry.args, keep=frozenset(rec.changed_args)),
                note=note,
            )
        )
        return steps

    def _evidence(
        self,
        t: TrajectoryView,
        state: dict[str, Any],
        call: Step,
        sig: str,
        rec: Recovery,
        *,
        confirms: bool,
    ) -> EvidenceTriple:
        """The failing call, what followed it, and whether this run confirms the lesson."""
        succeeded = (
            {"tool": rec.retry.tool, "args": rec.retry.args or {}, "changed": rec.how}
            if rec.retry is not None
            else None
        )
        return EvidenceTriple(
            trajectory_id=t.id,
            step=int(state["step"]),
            condition={k: state[k] for k in CONDITION_KEYS if k in state},
            action={"tool": call.tool, "args": call.args or {}},
            result={
                "error": (call.error or "")[:300],
                "error_signature": sig,
                "recovered": rec.retry is not None,
                "succeeded_with": succeeded,
                "outcome": t.outcome.value,
                "role": "supports",
                "confirms": confirms,
            },
        )

    def _warning(
        self,
        t: TrajectoryView,
        base: list[str],
        call: Step,
        state: dict[str, Any],
        sig: str,
        rec: Recovery,
    ) -> DraftCard:
        recovered = rec.retry is not None
        fixed = recovered and t.outcome is Outcome.success
        # the error itself is observed, whatever the run's end: the warning is confirmed
        evidence = [self._evidence(t, state, call, sig, rec, confirms=True)]
        handling = (
            rec.handling()
            if fixed or not recovered
            else "caution: no fix is known (a retry succeeded only in a run that failed anyway)"
        )
        return DraftCard(
            provenance={"producer": self.name, "confirmed": True},
            pattern="pre_call_warning",
            scenario=f'Calling {call.tool} can fail with "{sig}"',
            preconditions=[
                *base,
                f"tool == {cel_string(call.tool or '')}",
                # candidates: the retrospect stage keeps the one that separates across tasks
                *separating(call, rec),
            ],
            action_sequence=self._actions(call, rec, fixed=fixed),
            expected_outcome=f"{call.tool} succeeds",
            actual_outcome=(
                f'failed with "{sig}"; '
                + (
                    f"recovered: {rec.handling()}"
                    if fixed
                    else "a retry succeeded, but the run failed anyway"
                    if recovered
                    else "not recovered"
                )
                + f"; run outcome: {t.outcome.value}"
            ),
            failure_modes=[FailureMode(mode=sig, handling=handling)],
            confidence=confidence_of((e.trajectory_id, e.result) for e in evidence),
            evidence=evidence,
            signature_parts=(sig,),
        )

    def _recovery_card(
        self,
        t: TrajectoryView,
        base: list[str],
        call: Step,
        state_after: dict[str, Any],
        sig: str,
        rec: Recovery,
    ) -> DraftCard:
        assert rec.retry is not None
        # a recovery is confirmed only by a run that went on to succeed
        confirmed = t.outcome is Outcome.success
        evidence = [self._evidence(t, state_after, call, sig, rec, confirms=confirmed)]
        return DraftCard(
            provenance={"producer": self.name, "confirmed": confirmed},
            pattern="error_recovery",
            scenario=f'After {call.tool} failed with "{sig}"',
            preconditions=[
                *base,
                f"last_tool == {cel_string(call.tool or '')}",
                f"last_error == {cel_string(sig)}",
            ],
            action_sequence=self._actions(call, rec, fixed=confirmed),
            expected_outcome=f"{call.tool} succeeds on retry",
            actual_outcome=f"{rec.handling()}; run outcome: {t.outcome.value}"
            + ("" if confirmed else " (unconfirmed: seen only in a run that failed)"),
            failure_modes=[FailureMode(mode=sig, handling=rec.handling())],
            confidence=confidence_of((e.trajectory_id, e.result) for e in evidence),
            evidence=evidence,
        )

    def _success_path(
        self, t: TrajectoryView, base: list[str], calls: list[Step], first_state: dict[str, Any]
    ) -> DraftCard:
        path: list[Step] = []
        for c in calls:
            if c.error is None and (not path or path[-1].tool != c.tool):
                path.append(c)
        path = path[: self.max_actions]
        modes = {
            error_signature(c.error, c.args): FailureMode(
                mode=error_signature(c.error, c.args), handling="seen on the way; recovered"
            )
            for c in calls
            if c.error
        }
        return DraftCard(
            provenance={"producer": self.name},
            pattern="success_path",
            scenario=f"A {t.task_type} task that succeeded",
            preconditions=list(base),
            action_sequence=[
                ActionStep(tool=c.tool or "", params_template=params_template(c.args)) for c in path
            ],
            expected_outcome="the task succeeds",
            actual_outcome=f"succeeded after {len(calls)} tool calls",
            failure_modes=list(modes.values()),
            confidence=confidence_of([(t.id, {"outcome": "success"})]),
            evidence=[
                EvidenceTriple(
                    trajectory_id=t.id,
                    step=0,
                    condition={
                        k: first_state[k] for k in ("task_type", "step") if k in first_state
                    },
                    action={"tools": [c.tool for c in path]},
                    result={"outcome": t.outcome.value, "role": "supports", "confirms": True},
                )
            ],
            signature_parts=tuple(c.tool or "" for c in path),
        )
