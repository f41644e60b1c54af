"""The LLM extractor: pre-filtered trajectory -> decision points -> one card per point.

Every answer is parsed into a pydantic model and cached in the database the moment it parses,
keyed by model + prompt version + prompt text, so a re-run after a crash pays for nothing twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from memory_core.errors import LLMAnswerRejected
from memory_core.llm.cache import AnswerCache, cache_key
from memory_core.llm.client import LLMClient
from memory_core.llm.structured import ask
from memory_core.models.drafts import DraftCard, Extraction, TrajectoryView
from memory_core.models.trajectory import Outcome
from memory_core.retrospect.llm_answers import CardAnswers, DecisionPoints
from memory_core.retrospect.llm_cards import to_drafts
from memory_core.retrospect.prefilter import FilteredTrajectory, FilterLimits, render
from memory_core.retrospect.prompts import load_prompt
from memory_core.task_state import VOCABULARY

M = TypeVar("M", bound=BaseModel)
SHOWN = re.compile(r"^\[(\d+)\] ", re.M)  # the [n] that opens each line the model is shown


def cites_shown(shown: set[int]) -> Callable[[DecisionPoints], None]:
    """A decision-point answer may only name steps the model was shown."""

    def check(answer: DecisionPoints) -> None:
        unseen = sorted({p.step for p in answer.points} - shown)
        if unseen:
            raise ValueError(
                f"decision points cite step(s) {unseen} that the trajectory shown has no line "
                f"for (the [n] shown: {sorted(shown)[:40]})"
            )

    return check


def cites_points(count: int) -> Callable[[CardAnswers], None]:
    """A card answer may only build on the decision points it was given."""

    def check(answer: CardAnswers) -> None:
        unknown = sorted({c.point for c in answer.cards if c.point >= count})
        if unknown:
            raise ValueError(
                f"cards cite decision point(s) {unknown}, but only {count} were given "
                f"(0 to {count - 1})"
            )

    return check


def vocabulary_text() -> str:
    """The task-state variables as the card prompt lists them."""
    return "\n".join(f"    {name}: {meaning}" for name, meaning in VOCABULARY.items())


@dataclass
class _Cost:
    calls: int = 0
    cached: int = 0
    sent: int = 0
    received: int = 0


class LLMExtractor:
    """Extraction through any OpenAI-compatible LLM (see memory_core.llm.client)."""

    name = "llm"

    def __init__(
        self,
        *,
        llm: LLMClient,
        cache: AnswerCache,
        limits: FilterLimits | None = None,
        known_tools: frozenset[str] = frozenset(),
    ) -> None:
        self.llm = llm
        self.cache = cache
        self.limits = limits or FilterLimits()
        self.known_tools = known_tools

    def filtered(self, view: TrajectoryView) -> FilteredTrajectory:
        """What the LLM will see of this trajectory."""
        header = f"task_type: {view.task_type}; outcome: {view.outcome.value}"
        return render(view.steps, header=header, limits=self.limits)

    def _ask(
        self,
        view: TrajectoryView,
        prompt_id: str,
        messages: list[dict[str, str]],
        schema: type[M],
        cost: _Cost,
        check: Callable[[M], object],
    ) -> M:
        key = cache_key(model=self.llm.model, prompt_id=prompt_id, messages=messages)
        hit = self.cache.get(key)
        if hit is not None:
            cost.cached += 1
            return schema.model_validate(hit)
        try:
            result = ask(llm=self.llm, messages=messages, schema=schema, check=check)
        except LLMAnswerRejected:
            cost.calls += 2  # the answer and its repair, both refused by the check
            raise
        sent = sum(r.prompt_tokens for r in result.replies)
        received = sum(r.completion_tokens for r in result.replies)
        self.cache.put(
            key=key,
            trajectory_id=view.id,
            prompt_id=prompt_id,
            model=self.llm.model,
            answer=result.value.model_dump(mode="json"),
            prompt_tokens=sent,
            completion_tokens=received,
            calls=len(result.replies),
            namespace=view.namespace,
        )
        cost.calls += len(result.replies)
        cost.sent += sent
        cost.received += received
        return result.value

    def extract(self, trajectory: TrajectoryView) -> Extraction:
        """Decision points first; if there are any, one card per point. An answer wrong by
        content (after its repair prompt) is a rejection: no drafts, the reason and the raw
        answer kept on the Extraction."""
        if not any(s.type == "tool_call" for s in trajectory.steps):
            return Extraction()  # a conversation: its facts come from the facts stage, free
        filtered = self.filtered(trajectory)
        cost, rejected = _Cost(), None
        try:
            drafts = self._drafts(trajectory, filtered, cost)
        except LLMAnswerRejected as exc:
            drafts, rejected = [], (str(exc), exc.raw)
        return Extraction(
            drafts=drafts,
            calls=cost.calls,
            cached=cost.cached,
            tokens_sent=cost.sent,
            tokens_received=cost.received,
            tokens_saved=filtered.tokens_saved,
            rejected=rejected,
        )

    def _drafts(
        self, trajectory: TrajectoryView, filtered: FilteredTrajectory, cost: _Cost
    ) -> list[DraftCard]:
        points_prompt = load_prompt("decision_points")
        system, prompt_id = points_prompt.text, points_prompt.id
        if trajectory.outcome is Outcome.failure:
            focus = load_prompt("failure_focus")
            system, prompt_id = f"{system}\n\n{focus.text}", f"{prompt_id}+{focus.id}"
        points = self._ask(
            trajectory,
            prompt_id,
            [
                {"role": "system", "content": system},
                {"role": "user", "content": f"Trajectory:\n{filtered.text}"},
            ],
            DecisionPoints,
            cost,
            cites_shown({int(n) for n in SHOWN.findall(filtered.text)}),
        ).points
        drafts = []
        if points:
            cards_prompt = load_prompt("cards")
            cards = self._ask(
                trajectory,
                cards_prompt.id,
                [
                    {
                        "role": "system",
                        "content": cards_prompt.text.replace("{vocabulary}", vocabulary_text()),
                    },
                    {
                        "role": "user",
                        "content": f"Trajectory:\n{filtered.text}\n\nDecision points:\n"
                        + json.dumps([p.model_dump() for p in points], ensure_ascii=False),
                    },
                ],
                CardAnswers,
                cost,
                cites_points(len(points)),
            ).cards
            drafts = to_drafts(
                answers=cards,
                points=points,
                view=trajectory,
                known_tools=self.known_tools,
                provenance={
                    "producer": self.name,
                    "model": self.llm.model,
                    "prompt_version": f"{prompt_id}+{cards_prompt.id}",
                },
            )
        return drafts
