"""One regeneration attempt for LLM-made drafts that fail validation."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_core.errors import HindsightError, LLMTransient
from memory_core.llm.client import LLMClient
from memory_core.llm.structured import ask
from memory_core.models.card import Card
from memory_core.retrospect.llm_answers import CardAnswer
from memory_core.task_state import VOCABULARY

log = logging.getLogger(__name__)
PROMPT_ID = "regenerate.v1"
Regenerate = Callable[[Card, list[str]], dict[str, Any] | None]


def llm_regenerator(llm: LLMClient) -> Regenerate:
    """Ask the LLM to fix a failing card; None when it cannot (the card stays rejected)."""
    text = (Path(__file__).parent / "prompts" / f"{PROMPT_ID}.md").read_text(encoding="utf-8")
    system = text.replace("{vocabulary}", "\n".join(f"    {k}: {v}" for k, v in VOCABULARY.items()))

    def regenerate(card: Card, failed: list[str]) -> dict[str, Any] | None:
        current = {
            k: getattr(card, k)
            for k in (
                "scenario",
                "preconditions",
                "action_sequence",
                "expected_outcome",
                "actual_outcome",
                "failure_modes",
                "confidence",
            )
        }
        user = (
            f"The card:\n{json.dumps({'point': 0, **current}, ensure_ascii=False)}\n\n"
            f"It failed: {'; '.join(failed)}"
        )
        try:
            answer = ask(
                llm=llm,
                schema=CardAnswer,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            ).value
        except LLMTransient:
            raise  # the LLM is down, not the card: it stays a draft for the next run
        except HindsightError as exc:
            log.warning("regeneration of %s failed: %s", card.card_id, exc)
            return None
        fixed = answer.model_dump(mode="json", exclude={"point"})
        fixed["provenance"] = {
            **card.provenance,
            "regenerated": True,
            "regenerate_prompt": PROMPT_ID,
            "failed_before_regeneration": failed,
        }
        return fixed

    return regenerate
