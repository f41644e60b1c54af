"""A card's near-identical siblings, the condition that tells each apart, and the curator's two
ways to end a duplicate: merge it into this card (consolidation's own apply step) or reject it
(a version by the curator, as a review rejection is)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import literal_column, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.confidence import merged_confidence
from memory_core.consolidate.apply import apply_plan
from memory_core.consolidate.errors_alike import (
    errors_in,
    same_error_sets,
    union_failure_modes,
)
from memory_core.consolidate.plan import Merge, MergePlan
from memory_core.consolidate.rows import CardRow
from memory_core.db import read_session, session_scope
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.card import FIRST_TOOL_SQL, Card, CardKind, CardStatus, CardVersion
from memory_core.models.columns import utcnow
from memory_core.validate.review import _record

CANDIDATES = 100  # cards with the same first tool read per page
TITLE_ALIKE = 0.6  # word overlap of two scenarios (Jaccard) that reads as the same title
LIVE = (CardStatus.active.value, CardStatus.review.value)
_WORD = re.compile(r"[a-z0-9_]+")
_COMPARED = (
    col(Card.card_id),
    col(Card.scenario),
    col(Card.status),
    col(Card.confidence),
    col(Card.run_count),
    col(Card.preconditions),
    col(Card.action_sequence),
    col(Card.failure_modes),
)


@dataclass
class Sibling:
    """A near-identical card, why it counts as one, and the preconditions only each holds."""

    card_id: uuid.UUID
    scenario: str
    status: str
    confidence: float
    run_count: int
    why: str
    only_here: list[str]  # this card's preconditions the sibling lacks
    only_there: list[str]  # the sibling's preconditions this card lacks
    shared: list[str]


def _row(c: Card) -> CardRow:
    return CardRow(
        c.card_id,
        c.scenario,
        list(c.preconditions),
        list(c.action_sequence),
        list(c.failure_modes),
        c.confidence,
        c.evidence_count,
        c.use_count,
        c.success_count,
        c.failure_count,
        c.version,
        c.created_at,
        c.signature,
        c.run_count,
    )


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _title_overlap(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    return len(wa & wb) / max(len(wa | wb), 1)


def _first_tool(card: Any) -> str | None:
    steps = [s for s in card.action_sequence or [] if isinstance(s, dict) and s.get("tool")]
    return str(steps[0]["tool"]) if steps else None


def siblings_of(*, engine: Engine, namespace: str, card_id: uuid.UUID) -> list[Sibling]:
    """Live experience cards alike this one: the same first tool and the same failure
    signature, or the same first tool and a very similar title; best supported first."""
    with read_session(engine) as session:
        card = session.get(Card, card_id)
        if card is None or card.namespace != namespace:
            raise NotFound(f"no card {card_id} in namespace {namespace!r}")
        tool = _first_tool(card)
        if tool is None or card.kind != CardKind.experience.value:
            return []
        # the columns compared only: whole rows (every JSON column validated) cost most
        found = list(
            session.execute(
                select(*_COMPARED)
                .where(
                    col(Card.namespace) == namespace,
                    col(Card.status).in_(LIVE),
                    col(Card.kind) == CardKind.experience.value,
                    col(Card.card_id) != card_id,
                    # the first tool's index: that tool's cards only, not a scan for them
                    literal_column(FIRST_TOOL_SQL[engine.dialect.name]) == tool,
                )
                .limit(CANDIDATES)  # no order: the read stops at the limit
            ).all()
        )
    # this card's errors normalised once, not once per candidate (the card page's main cost)
    mine, out = errors_in(card.failure_modes or []), []
    for other in found:
        if _first_tool(other) != tool:
            continue
        alike = _title_overlap(card.scenario, other.scenario)
        theirs = errors_in(other.failure_modes or [])
        if (card.failure_modes or other.failure_modes) and same_error_sets(mine, theirs):
            why = f"same tool {tool} and failure signature"
        elif alike >= TITLE_ALIKE:
            why = f"same tool {tool}, titles {alike:.0%} alike"
        else:
            continue
        here, there = set(card.preconditions), set(other.preconditions)
        out.append(
            Sibling(
                card_id=other.card_id,
                scenario=other.scenario,
                status=other.status,
                confidence=other.confidence,
                run_count=other.run_count,
                why=why,
                only_here=[p for p in card.preconditions if p not in there],
                only_there=[p for p in other.preconditions if p not in here],
                shared=[p for p in card.preconditions if p in there],
            )
        )
    return sorted(out, key=lambda s: (-s.run_count, -s.confidence, str(s.card_id)))


def _pair(session: Session, namespace: str, card_id: uuid.UUID, sibling_id: uuid.UUID) -> Any:
    if card_id == sibling_id:
        raise InvalidInput("a card is not its own sibling", field="sibling")
    cards = []
    for cid in (card_id, sibling_id):
        c = session.get(Card, cid, with_for_update=True)
        if c is None or c.namespace != namespace:
            raise NotFound(f"no card {cid} in namespace {namespace!r}")
        cards.append(c)
    return cards


def merge_sibling(
    *, engine: Engine, namespace: str, card_id: uuid.UUID, sibling_id: uuid.UUID, actor: str
) -> None:
    """Merge the sibling into this card as consolidation merges near-duplicates (evidence
    copied, counts summed, failure modes united, the sibling superseded); both must be active.
    The versions name the curator who asked."""
    now = utcnow()
    with session_scope(engine) as session:
        card, other = _pair(session, namespace, card_id, sibling_id)
        for c in (card, other):
            if c.status != CardStatus.active.value:
                raise InvalidInput(
                    f"card {c.card_id} is {c.status}: only active cards merge (approve or "
                    "reject a card in review first)",
                    field="sibling",
                )
        a, b = _row(card), _row(other)
        merge = Merge(
            survivor=a,
            absorbed=[b],
            failure_modes=union_failure_modes([a.failure_modes, b.failure_modes]),
            confidence=merged_confidence([(a.confidence, {}), (b.confidence, {})]),
            why=f"merged by {actor[:80]} as siblings",
        )
        session.expunge_all()  # apply_plan writes through the connection, guarded by version
        applied = apply_plan(session, MergePlan(merges=[merge]), now)
        if not applied.merges:
            raise InvalidInput("a card changed meanwhile: reload the page and try again")
        # the consolidation step signs its versions; this merge was a person's decision
        session.execute(
            update(CardVersion)
            .where(
                col(CardVersion.card_id).in_([card_id, sibling_id]),
                col(CardVersion.version).in_([a.version + 1, b.version + 1]),
                col(CardVersion.created_at) == now,
            )
            .values(actor=actor)
        )


def reject_sibling(
    *,
    engine: Engine,
    namespace: str,
    card_id: uuid.UUID,
    sibling_id: uuid.UUID,
    actor: str,
    reason: str,
) -> None:
    """Reject the sibling (active or in review) with the curator's reason, as review does."""
    if not reason.strip():
        raise InvalidInput("a rejection needs a reason", field="reason")
    with session_scope(engine) as session:
        _, other = _pair(session, namespace, card_id, sibling_id)
        if other.status not in LIVE:
            raise InvalidInput(f"card {sibling_id} is already {other.status}", field="sibling")
        other.status = CardStatus.rejected.value
        _record(
            session,
            other,
            reason=f"rejected as a sibling of {card_id}: {reason.strip()}",
            actor=actor,
            fields=["status"],
        )
