"""From drafts to card rows: one row per signature, the best-ranked draft's.

Several runs (or task groups) often teach the same lesson in other words: the same
signature with another recovery note or argument template. Which of them a card shows must
not depend on the order the runs were claimed in (batch sizes, a killed worker, another
ingest order), so every draft has a rank (`draft_rank`: clean before quarantined, higher
stated confidence first, then a digest of its content) and a card nobody has touched since
retrospection wrote it (version 1, still a draft or quarantined) shows its best-ranked draft
whatever the order. Its confidence is the evidence estimate over every run plus the draft's
own offset from it (`confidence_offset`: an LLM's stated confidence; see writer._bump).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlmodel import Session, col

from memory_core.cards.confidence import confidence_of
from memory_core.models.card import LIVE_STATUSES, Card, CardStatus, CardVersion
from memory_core.models.columns import new_id
from memory_core.models.drafts import DraftCard
from memory_core.preconditions import compile_all
from memory_core.redact import redact, redact_value

RANK = "draft_rank"
OFFSET = "confidence_offset"
CONTENT = (
    "scenario",
    "preconditions",
    "action_sequence",
    "expected_outcome",
    "actual_outcome",
    "failure_modes",
    "status",
)
_REPLACEABLE = (CardStatus.draft.value, CardStatus.quarantined.value)


@dataclass(frozen=True)
class RowSpec:
    """What every row of one write shares."""

    namespace: str
    status: CardStatus  # the stage's default status
    provenance: dict[str, Any]
    now: Any
    max_chars: int
    max_depth: int


def card_snapshot(row: dict[str, Any]) -> dict[str, Any]:
    """A JSON-safe snapshot of a card row for its version history."""
    return {
        k: (str(v) if isinstance(v, uuid.UUID) else v.isoformat() if hasattr(v, "isoformat") else v)
        for k, v in row.items()
    }


def rank_draft(d: DraftCard) -> str:
    """Order-free choice among drafts of one lesson: clean first, then one that shows a fix,
    then the higher stated confidence, then the content itself (a digest), so any arrival
    order picks the same."""
    flagged = d.status is CardStatus.quarantined
    # a run where the call then succeeded and the run too shows what works; a draft from a
    # run that never recovered can only say "check its inputs", and must not hide the fix
    unfixed = not any(
        e.result.get("succeeded_with") and e.result.get("outcome") == "success" for e in d.evidence
    )
    body = json.dumps(
        [
            d.scenario,
            d.preconditions,
            [a.model_dump() for a in d.action_sequence],
            d.expected_outcome,
            d.actual_outcome,
            [f.model_dump() for f in d.failure_modes],
        ],
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    return f"{int(flagged)}|{int(unfixed)}|{1.0 - d.confidence:.6f}|{digest}"


def card_row(sig: str, group: Sequence[DraftCard], spec: RowSpec) -> dict[str, Any]:
    """The card row for one signature: its best-ranked draft (evidence-only drafts rank none)."""
    ranked = [(rank_draft(d), d) for d in group if not d.evidence_only]
    if not ranked:  # evidence for a stored card: never its content
        row = _row(sig, group[0], spec)
        row["provenance"].pop(RANK, None)
        return row
    rank, best = min(ranked, key=lambda rd: rd[0])
    row = _row(sig, best, spec)
    row["provenance"][RANK] = rank
    return row


def _row(sig: str, d: DraftCard, spec: RowSpec) -> dict[str, Any]:
    if d.status is CardStatus.rejected:
        sources = list(d.preconditions)  # kept as written: why it was rejected
    else:
        sources = [
            c.source
            for c in compile_all(
                d.preconditions, max_chars=spec.max_chars, max_depth=spec.max_depth
            )
        ]
    stated = [(t.trajectory_id, t.result) for t in d.evidence]
    row: dict[str, Any] = {
        "card_id": new_id(),
        "namespace": spec.namespace,
        "kind": "experience",
        # defence in depth: the extractors read redacted text already
        "scenario": redact(d.scenario[:1000]),
        # a rejected draft keeps its conditions as written (why it was rejected), and any
        # reader of rejected cards may read them: redacted like every other field
        "preconditions": [redact(p) for p in sources],
        "action_sequence": redact_value([a.model_dump() for a in d.action_sequence]),
        "expected_outcome": redact(d.expected_outcome),
        "actual_outcome": redact(d.actual_outcome),
        "failure_modes": redact_value([f.model_dump() for f in d.failure_modes]),
        "confidence": d.confidence,
        "status": (d.status or spec.status).value,
        "signature": sig,
        "provenance": {
            **spec.provenance,
            **d.provenance,
            "pattern": d.pattern,
            **({"flags": d.flags} if d.flags else {}),
            # the draft's own word beside the evidence estimate (0 for rule drafts)
            OFFSET: round(d.confidence - confidence_of(stated), 6) if stated else 0.0,
        },
        "evidence_count": 0,
        "created_at": spec.now,
        "updated_at": spec.now,
        "use_count": 0,
        "success_count": 0,
        "failure_count": 0,
        "consecutive_failures": 0,
        "version": 1,
    }
    row["_stated"] = stated  # not a column: the evidence the stated confidence came from
    return row


def columns(row: dict[str, Any]) -> dict[str, Any]:
    """The row's table columns (keys starting with _ are the writer's own)."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


def first_version(row: dict[str, Any], card_id: uuid.UUID, now: Any) -> dict[str, Any]:
    """The version-1 history row of a card written from this row."""
    return {
        "id": new_id(),
        "card_id": card_id,
        "version": 1,
        "snapshot": card_snapshot({**columns(row), "card_id": card_id}),
        "reason": _reason(row),
        "actor": str(row["provenance"].get("producer", "unknown")),
        "created_at": now,
    }


def prefer_better_drafts(
    session: Session, namespace: str, rows: list[dict[str, Any]], now: Any
) -> tuple[dict[str, uuid.UUID], set[uuid.UUID]]:
    """Ids of the live cards these signatures already have; a card untouched since it was
    written (version 1, draft or quarantined) takes a better-ranked draft's content."""
    found = session.execute(
        select(
            col(Card.signature),
            col(Card.card_id),
            col(Card.version),
            col(Card.status),
            col(Card.provenance),
        )
        .where(
            col(Card.namespace) == namespace,
            col(Card.signature).in_([r["signature"] for r in rows]),
            col(Card.status).in_(LIVE_STATUSES),
        )
        .order_by(col(Card.signature), col(Card.card_id))
        .with_for_update()  # in the writers' lock order; SQLite ignores it (one writer)
    ).all()
    by_sig = {r["signature"]: r for r in rows}
    ids: dict[str, uuid.UUID] = {}
    redone: set[uuid.UUID] = set()
    for sig, card_id, version, status, prov in found:
        ids[str(sig)] = card_id
        row = by_sig[str(sig)]
        mine, theirs = row["provenance"].get(RANK), (prov or {}).get(RANK)
        if (
            mine is None
            or theirs is None  # written before ranks: left as it is
            or version != 1
            or status not in _REPLACEABLE
            or mine >= theirs
        ):
            continue
        values = {k: row[k] for k in CONTENT}
        values["provenance"] = row["provenance"]
        session.execute(update(Card).where(col(Card.card_id) == card_id).values(**values))
        redone.add(card_id)
        first = first_version(row, card_id, now)
        session.execute(
            update(CardVersion)
            .where(col(CardVersion.card_id) == card_id, col(CardVersion.version) == 1)
            .values(snapshot=first["snapshot"], reason=first["reason"], actor=first["actor"])
        )
    return ids, redone


def _reason(row: dict[str, Any]) -> str:
    flags = row["provenance"].get("flags")
    if row["status"] in (CardStatus.quarantined.value, CardStatus.rejected.value) and flags:
        return f"{row['status']} by retrospection: " + "; ".join(flags)
    return "created by retrospection"
