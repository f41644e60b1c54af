"""What a query answers before it is encoded, and its JSON encoding: the served rows' JSON
joined as they are, the score terms, checks and near misses written from retrieval's own
objects, without model round trips.

Layer: retrieval.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from memory_core.models.card import CardPublic
from memory_core.preconditions import Check
from memory_core.serve.retrieval import Ranked, Retrieval, public_checks, warning_scope
from memory_core.serve.schemas import CardHit, unread_message


@dataclass(slots=True)
class Hit:
    """A match and its card as served, with the use id when one was recorded."""

    match: Ranked
    card: bytes  # JSON
    use_id: uuid.UUID | None = None


@dataclass(slots=True)
class Answer:
    """The cards served, how retrieval found them, and the query's id when uses were recorded."""

    hits: list[Hit]
    retrieval: Retrieval
    query_id: uuid.UUID | None = None
    # explain: the state's variables no card reads, each with the nearest known name
    unread: list[tuple[str, str | None]] | None = None


class RowsNotInMemory(Exception):
    """A served row would have to be read from the database."""


def plain_json(answer: Answer) -> bytes:
    """A plain query's answer as QueryResult's JSON, the served rows joined as they are."""
    return answer_json(answer, explain=False)


def answer_json(answer: Answer, *, explain: bool, prompt: str | None = None) -> bytes:
    """The answer as QueryResult's JSON (explained on request, with the prompt block given),
    written from the hits and the retrieval as they are: no model is built or validated."""
    return orjson.dumps(
        {
            "cards": [_hit(h, explain) for h in answer.hits],
            "prompt": prompt,
            "explain": _explanation(answer) if explain else None,
            "query_id": str(answer.query_id) if answer.query_id is not None else None,
        }
    )


def _hit(h: Hit, explain: bool) -> dict[str, Any]:
    """CardHit's fields, in order, the served row's JSON as it is."""
    return {
        "card": orjson.Fragment(h.card),
        # the fields themselves, in order: every one a float or None (retrieval's
        # score_entry), which orjson writes as model_dump(mode="json") would have
        # (inf and NaN as null), without a serializer pass per card
        "score": h.match.score.__dict__,
        "use_id": str(h.use_id) if h.use_id is not None else None,
        "checks": _checks(h.match.checks) if explain else None,
    }


def _checks(checks: Sequence[Check]) -> list[dict[str, Any]]:
    """PreconditionCheck's fields of each check."""
    return [
        {
            "expression": c.expression,
            "verdict": c.verdict.value,
            "missing": list(c.missing),
            "detail": c.detail,
        }
        for c in checks
    ]


def _explanation(answer: Answer) -> dict[str, Any]:
    """Explanation's fields: the counts, the near misses and the variables no card reads."""
    retrieval = answer.retrieval
    return {
        "active_cards": retrieval.active_cards,
        "candidates": retrieval.candidates,
        "near_misses": [
            {
                "card_id": str(m.entry.card_id),
                "scenario": m.entry.scenario,
                "checks": _checks(m.checks),
                "score": m.score.__dict__,
            }
            for m in retrieval.near_misses
        ],
        "unread_variables": [
            {"name": name, "did_you_mean": near, "message": unread_message(name, near)}
            for name, near in answer.unread or ()
        ],
        "demoted": [{"card_id": str(c), "reason": r} for c, r in retrieval.demoted.items()],
    }


def check_json(tool: str, answer: Answer) -> bytes:
    """A check's answer as CheckActionResult's JSON (written as `answer_json` writes a query's)."""
    return orjson.dumps(
        {
            "tool": tool,
            "warnings": warnings(answer.hits, answer.retrieval.demoted),
            "cards": [_hit(h, False) for h in answer.hits],
            "query_id": str(answer.query_id) if answer.query_id is not None else None,
        }
    )


def warnings(hits: Sequence[Hit], demoted: Mapping[uuid.UUID, str]) -> list[dict[str, Any]]:
    """Each hit's failure modes as a check's warnings, best card first (a demoted reminder's
    with why it comes after the others)."""
    out = []
    for h in hits:
        card = orjson.loads(h.card)  # the served row: the card's public JSON
        scope = warning_scope(h.match.entry.compiled)
        why = demoted.get(h.match.entry.card_id)
        for fm in card["failure_modes"]:
            warning = {
                "card_id": card["card_id"],
                "confidence": card["confidence"],
                "mode": fm.get("mode", ""),
                "handling": fm.get("handling", ""),
                "scope": scope,
            }
            if why:  # the call is not of the reminder's kind
                warning["demoted"] = why
            out.append(warning)
    return out


def card_hits(hits: Sequence[Hit], *, explain: bool) -> list[CardHit]:
    """The hits as API models (each card parsed once), with the checks when explained."""
    return [
        CardHit(
            card=CardPublic.model_validate_json(h.card),
            score=h.match.score,
            use_id=h.use_id,
            checks=public_checks(h.match.checks) if explain else None,
        )
        for h in hits
    ]
