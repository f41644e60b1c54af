"""Cards stored through the API or MCP: validated exactly like nightly drafts, marked as
written by an operator (provenance comes from the key, never from the payload).

Layer: service.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import weakref
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.draft_rows import card_snapshot
from memory_core.cards.known_values import known_values
from memory_core.db import session_scope
from memory_core.errors import Conflict, InvalidInput, InvalidPrecondition
from memory_core.everywhere import EVERYWHERE, holds_everywhere
from memory_core.models.card import LIVE_SQL, Card, CardStatus, CardVersion
from memory_core.preconditions import MAX_PRECONDITIONS, compile_all, normalise_text
from memory_core.screen.gate import screen_card
from memory_core.screen.provenance import Origin, with_origin
from memory_core.serve.keys import Principal
from memory_core.serve.schemas import CardIn
from memory_core.validate.rows import check_cards


def operator_signature(card: CardIn) -> str:
    """The same lesson stored twice is one card: scenario, preconditions and modes decide."""
    body = {
        "pattern": "operator",
        "scenario": normalise_text(card.scenario),
        "pre": sorted(card.preconditions),
        "modes": sorted(normalise_text(f.mode) for f in card.failure_modes),
        **({"everywhere": True} if card.applies_everywhere else {}),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:40]


# What a namespace's states take (memory_core.cards.known_values) reads up to 5,000 learnt cards:
# 0.1-0.2 s of CPU, on every card written, was most of a write's cost. It changes when the
# stages learn (an operator's own cards add nothing to it), so a write reuses the value read
# within the last KNOWN_VALUES_S; a card negating a value learnt in those seconds is refused
# as holding on every state until then, with the rule named.
KNOWN_VALUES_S = 10.0
_KNOWN: weakref.WeakKeyDictionary[Engine, dict[str, tuple[float, frozenset[str]]]] = (
    weakref.WeakKeyDictionary()
)
_KNOWN_LOCK = threading.Lock()


def _known_values(engine: Engine, namespace: str) -> frozenset[str]:
    """known_values of the namespace, read at most once every KNOWN_VALUES_S per engine."""
    now = time.monotonic()
    with _KNOWN_LOCK:
        hit = _KNOWN.get(engine, {}).get(namespace)
    if hit is not None and now - hit[0] < KNOWN_VALUES_S:
        return hit[1]
    with Session(engine) as session:
        found = known_values(session, namespace)
    with _KNOWN_LOCK:
        _KNOWN.setdefault(engine, {})[namespace] = (now, found)
    return found


def store_card(
    *,
    engine: Engine,
    principal: Principal,
    card: CardIn,
    via: str,
    review_below: float = 0.5,
    registry: frozenset[str] | None = None,
    max_expression_chars: int = 512,
    max_expression_depth: int = 8,
    max_preconditions: int = MAX_PRECONDITIONS,
    screen: bool = True,
) -> Card:
    """Validate and store one card: active when an admin key wrote it, else in review (and
    below review_below confidence); quarantined, with the reason, when it reads as an
    instruction to the agent."""
    principal.require("write")
    sources = [
        c.source
        for c in compile_all(
            card.preconditions,
            max_chars=max_expression_chars,
            max_depth=max_expression_depth,
            max_count=max_preconditions,
        )
    ]
    if not card.applies_everywhere:
        # every literal taken, then none: only a set that picks states by values alone (a
        # negation) needs what the namespace's states take, so most writes read nothing
        why = holds_everywhere(sources)
        if why is None and holds_everywhere(sources, used=frozenset()) is not None:
            why = holds_everywhere(sources, used=_known_values(engine, principal.namespace))
        if why:  # a card on every state reaches every query: only when its writer says so
            raise InvalidPrecondition(why, field="preconditions")
    normalised = card.model_copy(update={"preconditions": sources})
    flags = screen_card(card.model_dump()) if screen else []
    provenance: dict[str, Any] = with_origin(
        {"producer": "operator", "operator": True, "via": via},
        Origin.operator,
        key_id=str(principal.key_id),
        **({"flags": flags} if flags else {}),
        **({EVERYWHERE: True} if card.applies_everywhere else {}),
    )
    row = Card(
        namespace=principal.namespace,
        kind="experience",
        scenario=card.scenario,
        preconditions=sources,
        action_sequence=[a.model_dump() for a in card.action_sequence],
        expected_outcome=card.expected_outcome,
        actual_outcome=card.actual_outcome,
        # the origin is the server's to say, whatever the payload claims
        failure_modes=[
            {**f.model_dump(), "origin": Origin.operator.value} for f in card.failure_modes
        ],
        confidence=card.confidence,
        status=CardStatus.draft.value,
        signature=operator_signature(normalised),
        provenance=provenance,
    )
    # the nightly drafts' rules, on this one card, checked row by row: the suite itself costs
    # about a second of CPU a card, holding the interpreter (memory_core.validate.rows)
    failures = check_cards([row], registry=registry)
    if failures:
        raise InvalidInput(
            "the card fails validation: " + "; ".join(failures[str(row.card_id)]), field="card"
        )
    trusted = principal.allows("admin") or not screen
    if flags:
        row.status = CardStatus.quarantined.value
    elif trusted and card.confidence >= review_below:
        row.status = CardStatus.active.value
    else:  # a non-admin key's card waits for a person
        row.status = CardStatus.review.value
    with session_scope(engine) as session:
        existing = session.execute(
            select(col(Card.card_id)).where(
                col(Card.namespace) == principal.namespace,
                col(Card.signature) == row.signature,
                # as the partial index's own WHERE: with the statuses as parameters SQLite
                # cannot tell the index applies and walks the namespace (1.7 ms at 5k cards)
                text(LIVE_SQL),
            )
        ).scalar_one_or_none()
        if existing is not None:
            raise Conflict(f"the same card is already stored as {existing}")
        session.add(row)
        session.flush()
        session.add(
            CardVersion(
                card_id=row.card_id,
                version=1,
                snapshot=card_snapshot(row.model_dump()),
                reason=f"stored by an operator through the {via}"
                + (f"; quarantined: {'; '.join(flags)}" if flags else ""),
                actor=principal.actor,
            )
        )
    return row
