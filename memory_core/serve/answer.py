"""What a query answers before it is encoded, and its plain JSON encoding (no explain, no
prompt): the served rows' JSON joined as they are, without model round trips.

Layer: retrieval.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from memory_core.models.card import CardPublic
from memory_core.serve.retrieval import Ranked, Retrieval, public_checks
from memory_core.serve.schemas import CardHit


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
    return orjson.dumps(
        {
            "cards": [
                {
                    "card": orjson.Fragment(h.card),
                    # the fields themselves, in order: every one a float or None (retrieval's
                    # score_entry), which orjson writes as model_dump(mode="json") would have
                    # (inf and NaN as null), without a serializer pass per card
                    "score": h.match.score.__dict__,
                    "use_id": str(h.use_id) if h.use_id is not None else None,
                    "checks": None,
                }
                for h in answer.hits
            ],
            "prompt": None,
            "explain": None,
            "query_id": str(answer.query_id) if answer.query_id is not None else None,
        }
    )


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
