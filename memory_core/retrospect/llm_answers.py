"""The shapes LLM answers must take: decision points, then one card per point."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from memory_core.models.card import ActionStep, FailureMode


class DecisionPoint(BaseModel):
    """A moment where what the agent did next decided how the run went."""

    step: int = Field(ge=0, description="the [n] of the line where the decision was taken")
    kind: Literal["error", "retry", "recovery", "outcome", "other"]
    trigger: str = Field(max_length=500)
    action: str = Field(max_length=500)
    outcome: str = Field(max_length=500)


class DecisionPoints(BaseModel):
    """The decision-point prompt's answer (empty when the run taught nothing)."""

    points: list[DecisionPoint] = Field(default_factory=list, max_length=12)


class CardAnswer(BaseModel):
    """One card as the LLM writes it."""

    point: int = Field(ge=0)
    scenario: str = Field(min_length=1, max_length=1000)
    preconditions: list[str] = Field(default_factory=list, max_length=12)
    action_sequence: list[ActionStep] = Field(min_length=1, max_length=12)
    expected_outcome: str = ""
    actual_outcome: str = ""
    failure_modes: list[FailureMode] = Field(default_factory=list, max_length=12)
    confidence: float = Field(ge=0.0, le=1.0)


class CardAnswers(BaseModel):
    """The card prompt's answer (empty when the run taught nothing)."""

    cards: list[CardAnswer] = Field(default_factory=list, max_length=12)


TRIAL_LABEL = r"^[SF][1-9][0-9]?$"


class ContrastCard(CardAnswer):
    """One contrast card: what a failed trial did that a successful trial of the same task did
    not, why that failed the run, and the lesson, citing the trials and the step it rests on."""

    point: int = Field(default=0, ge=0)  # unused: a contrast card cites trials instead
    failed_trial: str = Field(pattern=TRIAL_LABEL, description="the label of a failed trial, F1..")
    step: int = Field(ge=0, description="the [n] of the failed trial's call the card rests on")
    successful_trial: str = Field(pattern=TRIAL_LABEL, description="a successful trial, S1..")
    difference: str = Field(min_length=1, max_length=500)
    reason: str = Field(min_length=1, max_length=500)


class ContrastAnswers(BaseModel):
    """The contrast prompt's answer (empty when nothing separates the trials)."""

    cards: list[ContrastCard] = Field(default_factory=list, max_length=8)
