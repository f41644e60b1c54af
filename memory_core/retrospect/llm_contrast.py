"""The LLM contrast (ExpeL-style): a task's successful and failed trials side by side, one
call, cards with the reasons the failed trials failed.

It rides along the per-run LLM extraction (an Extractor, chained after the LLM extractor):
a run contrasts its task group when it is the group's newest stored run (latest created_at,
then id) and the group has at least one success and one failure; its siblings come from the
database (memory_core.retrospect.siblings.GROUP_KEY, written at ingest). So a group is
contrasted again, whole, whenever it gains runs, by one run, whichever batch or worker that
run lands in; its drafts travel with that run's other LLM drafts. The result is a function
of the group's stored runs: the trials shown are chosen by content (`run_digest`, never the
random run ids), every run of the group is matched against the cards (llm_contrast_cards),
and successful runs elsewhere are counted against them by `contradicting`, whichever batch
brought them. Re-contrasting an unchanged group asks nothing (the cache) and writes nothing
new (evidence is unique per card, run and step).

What the model sees is budgeted: at most `max_trials` trials per side (by content digest, so
the prompt of an unchanged group is the same text in any database), each through the
pre-filter, dropping trials from the larger side while the prompt is over `max_tokens`. The
answer is cached (model + prompt id + messages; trajectory_id None: it belongs to a group), so
a re-run or a retry pays nothing twice. An outage (LLMTransient) propagates: the run's LLM
part is retried, then parked and re-driven, and the group is contrasted again then. So does an
answer still unparsable after the repair prompt (LLMOutputInvalid), as for the per-run answers:
a retry may fix it, so the run is a dead letter, and a re-drive contrasts the group again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from memory_core.cards.confidence import confidence_of
from memory_core.llm.cache import AnswerCache, cache_key
from memory_core.llm.client import LLMClient
from memory_core.llm.structured import ask
from memory_core.models.card import CardStatus
from memory_core.models.drafts import Extraction, TrajectoryView, view_of
from memory_core.models.trajectory import Outcome, Trajectory
from memory_core.retrospect.contradict import contradicting
from memory_core.retrospect.contrast import task_group
from memory_core.retrospect.llm_answers import ContrastAnswers
from memory_core.retrospect.llm_contrast_cards import PRODUCER, Trial, contrast_drafts
from memory_core.retrospect.llm_extractor import vocabulary_text
from memory_core.retrospect.prefilter import FilteredTrajectory, FilterLimits, render
from memory_core.retrospect.prompts import load_prompt
from memory_core.retrospect.siblings import newest_of, newest_run, siblings_of

T = Trajectory


def run_digest(view: TrajectoryView) -> str:
    """A run's content digest: orders trials by what they are, not by their random ids."""
    body = json.dumps(
        [view.outcome.value, [s.model_dump(mode="json") for s in view.steps]],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(body.encode()).hexdigest()


def _side(views: Sequence[TrajectoryView], outcome: Outcome, n: int) -> list[TrajectoryView]:
    # by content, then id (copies of one run read the same): the same stored runs give the
    # same prompt in any database, whichever batch or worker holds the group
    return sorted(
        (v for v in views if v.outcome is outcome), key=lambda v: (run_digest(v), str(v.id))
    )[:n]


class LLMContrast:
    """Contrast a run's task group through any OpenAI-compatible LLM, when the run holds it."""

    name = PRODUCER

    def __init__(
        self,
        *,
        llm: LLMClient,
        cache: AnswerCache,
        engine: Engine,
        limits: FilterLimits | None = None,
        max_trials: int = 3,
        max_tokens: int = 8000,
        screen: bool = True,
        known_tools: frozenset[str] = frozenset(),
    ) -> None:
        self.llm, self.cache, self.engine = llm, cache, engine
        self.limits = limits or FilterLimits()
        self.max_trials, self.max_tokens = max_trials, max_tokens
        self.screen, self.known_tools = screen, known_tools

    def extract(self, trajectory: TrajectoryView) -> Extraction:
        """The contrast of the run's task group if this run holds it, else nothing."""
        group, runs = self.group_of(trajectory)
        if group is None:
            return Extraction()
        return self.contrast(group=group, runs=runs, holder=trajectory)

    def group_of(self, view: TrajectoryView) -> tuple[str | None, list[TrajectoryView]]:
        """The run's task group and its stored runs, if this run is the group's newest."""
        with Session(self.engine) as session:
            row = session.get(T, view.id)
            if row is None:
                return None, []
            group = row.task_group or task_group(extra=row.extra or {}, steps=view.steps)
            if not group:
                return None, []
            same = siblings_of(row.namespace, group)
            # which run is the newest first (ids and times only): most runs are not
            stamps = session.execute(select(col(T.id), col(T.created_at)).where(*same)).all()
            if newest_run([*((r[0], r[1]) for r in stamps), (row.id, row.created_at)]) != row.id:
                return None, []  # the group's newest run contrasts it
            newest = newest_of(row.namespace, group)
            rows = [r for r in session.exec(newest).all() if r.id != row.id]
            return str(group), [view, *(view_of(r) for r in rows)]

    def trials(
        self, runs: Sequence[TrajectoryView]
    ) -> tuple[list[Trial], list[FilteredTrajectory]]:
        """The trials shown, labelled, within the budget (at least one per side)."""
        wins = _side(runs, Outcome.success, self.max_trials)
        losses = _side(runs, Outcome.failure, self.max_trials)
        while True:
            trials = [Trial(f"S{i}", v) for i, v in enumerate(wins, 1)]
            trials += [Trial(f"F{i}", v) for i, v in enumerate(losses, 1)]
            shown = [self._render(t) for t in trials]
            over = sum(s.tokens_after for s in shown) > self.max_tokens
            if not over or (len(wins) <= 1 and len(losses) <= 1):
                return trials, shown
            side = wins if len(wins) > len(losses) else losses
            side.pop()

    def _render(self, trial: Trial) -> FilteredTrajectory:
        state = "succeeded" if trial.view.outcome is Outcome.success else "failed"
        header = f"=== trial {trial.label} ({state}) ==="
        return render(trial.view.steps, header=header, limits=self.limits)

    def contrast(
        self, *, group: str, runs: Sequence[TrajectoryView], holder: TrajectoryView
    ) -> Extraction:
        """One call for the group (cached), its cards grounded in the trials they cite."""
        if not any(r.outcome is Outcome.success for r in runs) or not any(
            r.outcome is Outcome.failure for r in runs
        ):
            return Extraction()  # nothing to contrast with
        trials, shown = self.trials(runs)
        prompt = load_prompt("contrast")
        task_type = holder.task_type
        messages = [
            {"role": "system", "content": prompt.text.replace("{vocabulary}", vocabulary_text())},
            {
                "role": "user",
                "content": f"Trials of one task (task_type: {task_type}):\n\n"
                + "\n\n".join(s.text for s in shown),
            },
        ]
        out = Extraction(tokens_saved=sum(s.tokens_saved for s in shown))
        key = cache_key(model=self.llm.model, prompt_id=prompt.id, messages=messages)
        hit = self.cache.get(key)
        if hit is not None:
            out.cached += 1
            answer = ContrastAnswers.model_validate(hit)
        else:
            # still unparsable after its repair: LLMOutputInvalid parks the run (a dead letter)
            result = ask(llm=self.llm, messages=messages, schema=ContrastAnswers)
            answer = result.value
            sent = sum(r.prompt_tokens for r in result.replies)
            received = sum(r.completion_tokens for r in result.replies)
            self.cache.put(
                key=key,
                trajectory_id=None,
                prompt_id=prompt.id,
                model=self.llm.model,
                answer=answer.model_dump(mode="json"),
                prompt_tokens=sent,
                completion_tokens=received,
                calls=len(result.replies),
                namespace=holder.namespace,
            )
            out.calls += len(result.replies)
            out.tokens_sent, out.tokens_received = sent, received
        labelled = {t.view.id for t in trials}
        out.drafts = contrast_drafts(
            answers=answer.cards,
            trials=trials,
            others=sorted((r for r in runs if r.id not in labelled), key=lambda v: str(v.id)),
            group=group,
            provenance={
                "producer": PRODUCER,
                "origin": "llm",
                "model": self.llm.model,
                "prompt_version": prompt.id,
            },
            screen=self.screen,
            known_tools=self.known_tools,
        )
        # a successful run elsewhere that makes a call the card warns of counts against it,
        # as for the rule contrast (checked against the namespace's stored successful runs)
        live = [d for d in out.drafts if d.status is not CardStatus.rejected]
        wins = sorted((r for r in runs if r.outcome is Outcome.success), key=lambda v: str(v.id))
        out.drafts += contradicting(
            engine=self.engine, namespace=holder.namespace, drafts=live, wins=wins
        )
        for d in live:  # the group's own wins were matched already: one row per run and step
            rows = {(e.trajectory_id, e.step): e for e in reversed(d.evidence)}
            d.evidence = sorted(rows.values(), key=lambda e: (str(e.trajectory_id), e.step))
            d.confidence = confidence_of((e.trajectory_id, e.result) for e in d.evidence)
        return out
