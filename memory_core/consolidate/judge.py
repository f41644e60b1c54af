"""An LLM judges pairs of cards that are alike but not clearly the same lesson."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from sqlalchemy.engine import Engine

from memory_core.consolidate.rows import CardRow, PairJudge, PairJudgement
from memory_core.errors import HindsightError
from memory_core.llm.cache import AnswerCache, cache_key
from memory_core.llm.client import LLMClient
from memory_core.llm.structured import ask
from memory_core.redact.fields import redact_fields
from memory_core.retrospect.grounding import check_grounding, evidence_views

log = logging.getLogger(__name__)
PROMPT_ID = "judge.v1"


def _card(row: CardRow) -> dict[str, object]:
    return redact_fields(
        {
            "scenario": row.scenario,
            "preconditions": row.preconditions,
            "action_sequence": row.action_sequence,
            "failure_modes": row.failure_modes,
            "created": str(row.created_at),
        }
    )  # the judge's prompt carries no secret


def llm_judge(
    *, llm: LLMClient, cache: AnswerCache | None = None, namespace: str | None = None
) -> PairJudge:
    """A PairJudge asking the LLM about the cards of `namespace`; answers cached by prompt (and
    marked with the namespace, whose deletion takes them), invalid ones ignored."""
    system = (Path(__file__).parent / "prompts" / f"{PROMPT_ID}.md").read_text(encoding="utf-8")

    def judge(older: CardRow, newer: CardRow) -> PairJudgement | None:
        user = (
            f"A (older):\n{json.dumps(_card(older), ensure_ascii=False, default=str)}\n\n"
            f"B (newer):\n{json.dumps(_card(newer), ensure_ascii=False, default=str)}"
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        key = cache_key(model=llm.model, prompt_id=PROMPT_ID, messages=messages)
        hit = cache.get(key) if cache else None
        if hit is not None:
            return PairJudgement.model_validate(hit)
        try:
            result = ask(llm=llm, messages=messages, schema=PairJudgement)
        except HindsightError as exc:  # invalid JSON twice, 4xx, timeouts: judge nothing
            log.warning("no judgement for %s / %s: %s", older.card_id, newer.card_id, exc)
            return None
        if cache:
            cache.put(
                key=key,
                trajectory_id=None,
                prompt_id=PROMPT_ID,
                model=llm.model,
                answer=result.value.model_dump(mode="json"),
                prompt_tokens=sum(r.prompt_tokens for r in result.replies),
                completion_tokens=sum(r.completion_tokens for r in result.replies),
                calls=len(result.replies),
                namespace=namespace,
            )
        return result.value

    return judge


def grounded_judge(*, judge: PairJudge, engine: Engine) -> PairJudge:
    """A judged merge is held to the checks every LLM-made card passes: "same" stands only
    when each card's preconditions hold on some state of the other's runs (the survivor then
    speaks for all the evidence it absorbs); otherwise the pair is left apart."""

    def check(older: CardRow, newer: CardRow) -> PairJudgement | None:
        verdict = judge(older, newer)
        if verdict is None or verdict.relation != "same":
            return verdict
        runs = evidence_views(engine=engine, card_ids=[older.card_id, newer.card_id])
        for card, other in ((older, newer), (newer, older)):
            views = runs.get(other.card_id, [])
            if not views:
                continue  # no stored run to check against (evidence archived): nothing to say
            g = check_grounding(preconditions=card.preconditions, tools=(), texts=(), views=views)
            if g.status is not None:
                log.info(
                    "judged same, not merged: %s / %s: %s", older.card_id, newer.card_id, g.flags
                )
                return PairJudgement(
                    relation="unrelated",
                    reason=f"judged the same, but {'; '.join(g.flags)} of the other card"[:500],
                )
        return verdict

    return check
