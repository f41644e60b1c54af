"""Write card drafts: one live card per signature, evidence appended idempotently."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, case, literal, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col

from memory_core.models.card import (
    LIVE_STATUSES,
    Card,
    CardEvidence,
    CardStatus,
    CardVersion,
)
from memory_core.models.columns import new_id, utcnow
from memory_core.preconditions import compile_all
from memory_core.redact import redact, redact_value
from memory_core.retrospect.drafts import DraftCard
from memory_core.screen.gate import screen_draft

_LIVE_SQL = text("status IN ('draft', 'review', 'active', 'quarantined')")
MAX_CONFIDENCE_FROM_EVIDENCE = 0.95
EVIDENCE_GAIN = 0.1  # each further supporting trajectory closes 10% of the gap to certainty


@dataclass
class WriteResult:
    """Cards created and evidence rows added by one write."""

    created: int = 0
    evidence_added: int = 0


def _insert(session: Session, table: Any) -> Any:
    return (
        pg_insert(table)
        if session.get_bind().dialect.name == "postgresql"
        else sqlite_insert(table)
    )


def card_snapshot(row: dict[str, Any]) -> dict[str, Any]:
    """A JSON-safe snapshot of a card row for its version history."""
    return {
        k: (str(v) if isinstance(v, uuid.UUID) else v.isoformat() if hasattr(v, "isoformat") else v)
        for k, v in row.items()
    }


def write_drafts(
    *,
    session: Session,
    namespace: str,
    drafts: Sequence[DraftCard],
    status: CardStatus,
    provenance: dict[str, Any],
    max_expression_chars: int = 512,
    max_expression_depth: int = 8,
    screen: bool = True,
) -> WriteResult:
    """Store drafts in the caller's transaction; a signature already live gains evidence only.

    With screen, drafts whose content from the run reads as an instruction are quarantined."""
    if not drafts:
        return WriteResult()
    if screen:
        drafts = [screen_draft(d) for d in drafts]
    by_sig: dict[str, DraftCard] = {}
    evidence: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in drafts:
        # a rejected draft is a record of a bad answer, not a lesson to merge with others
        sig = d.signature if d.status is not CardStatus.rejected else f"rejected-{uuid.uuid4()}"
        by_sig.setdefault(sig, d)
        evidence[sig].extend(e.model_dump(mode="json") for e in d.evidence)
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for sig, d in by_sig.items():
        if d.status is CardStatus.rejected:
            sources = list(d.preconditions)  # kept as written: why it was rejected
        else:
            sources = [
                c.source
                for c in compile_all(
                    d.preconditions, max_chars=max_expression_chars, max_depth=max_expression_depth
                )
            ]
        rows.append(
            {
                "card_id": new_id(),
                "namespace": namespace,
                "kind": "experience",
                # defence in depth: the extractors read redacted text already
                "scenario": redact(d.scenario[:1000]),
                "preconditions": sources,
                "action_sequence": redact_value([a.model_dump() for a in d.action_sequence]),
                "expected_outcome": redact(d.expected_outcome),
                "actual_outcome": redact(d.actual_outcome),
                "failure_modes": redact_value([f.model_dump() for f in d.failure_modes]),
                "confidence": d.confidence,
                "status": (d.status or status).value,
                "signature": sig,
                "provenance": {
                    **provenance,
                    **d.provenance,
                    "pattern": d.pattern,
                    **({"flags": d.flags} if d.flags else {}),
                },
                "evidence_count": 0,
                "created_at": now,
                "updated_at": now,
                "use_count": 0,
                "success_count": 0,
                "failure_count": 0,
                "consecutive_failures": 0,
                "version": 1,
            }
        )
    # every write takes its row locks in one global order (signature, then card id), so
    # concurrent workers wait for each other instead of deadlocking (seen on PostgreSQL)
    rows.sort(key=lambda r: r["signature"])
    ins = _insert(session, Card).on_conflict_do_nothing(
        index_elements=["namespace", "signature"], index_where=_LIVE_SQL
    )
    created = {
        r.card_id: r
        for r in session.execute(ins.returning(col(Card.card_id), col(Card.signature)), rows).all()
    }
    if created:
        by_id = {r["card_id"]: r for r in rows}
        session.execute(
            _insert(session, CardVersion),
            [
                {
                    "id": new_id(),
                    "card_id": cid,
                    "version": 1,
                    "snapshot": card_snapshot(by_id[cid]),
                    "reason": _reason(by_id[cid]),
                    "actor": str(by_id[cid]["provenance"].get("producer", "unknown")),
                    "created_at": now,
                }
                for cid in created
            ],
        )
    ids: dict[str, uuid.UUID] = {str(r.signature): r.card_id for r in created.values()}
    ids.update(
        session.execute(
            select(col(Card.signature), col(Card.card_id)).where(
                col(Card.namespace) == namespace,
                col(Card.signature).in_([s for s in by_sig if s not in ids]),
                col(Card.status).in_(LIVE_STATUSES),
            )
        )
        .tuples()
        .all()
    )
    ev_rows = [
        {
            "id": new_id(),
            "card_id": ids[sig],
            "trajectory_id": uuid.UUID(e["trajectory_id"]),
            "step": e["step"],
            "condition": redact_value(e["condition"]),
            "action": redact_value(e["action"]),
            "result": redact_value(e["result"]),
            "created_at": now,
        }
        for sig, evs in evidence.items()
        for e in evs
    ]
    ev_rows.sort(key=lambda r: (str(r["card_id"]), str(r["trajectory_id"]), r["step"]))
    ev_ins = _insert(session, CardEvidence).on_conflict_do_nothing(
        index_elements=["card_id", "trajectory_id", "step"]
    )
    added: dict[uuid.UUID, int] = defaultdict(int)
    if ev_rows:  # an executemany of no rows would insert one empty row
        for (cid,) in session.execute(ev_ins.returning(col(CardEvidence.card_id)), ev_rows).all():
            added[cid] += 1
    _bump(session, {cid: (n, cid in created) for cid, n in added.items()}, now)
    return WriteResult(created=len(created), evidence_added=sum(added.values()))


def _reason(row: dict[str, Any]) -> str:
    flags = row["provenance"].get("flags")
    if row["status"] in (CardStatus.quarantined.value, CardStatus.rejected.value) and flags:
        return f"{row['status']} by retrospection: " + "; ".join(flags)
    return "created by retrospection"


def _bump(session: Session, counts: dict[uuid.UUID, tuple[int, bool]], now: Any) -> None:
    """Add new evidence to counts and confidence in one set-based statement per card batch."""
    if not counts:
        return
    boosted = 1 - (1 - col(Card.confidence)) * bindparam("keep")
    stmt = (
        update(Card)
        .where(col(Card.card_id) == bindparam("cid"))
        .values(
            evidence_count=col(Card.evidence_count) + bindparam("n"),
            confidence=case(
                (col(Card.confidence) >= MAX_CONFIDENCE_FROM_EVIDENCE, col(Card.confidence)),
                (boosted > MAX_CONFIDENCE_FROM_EVIDENCE, literal(MAX_CONFIDENCE_FROM_EVIDENCE)),
                else_=boosted,
            ),
            updated_at=bindparam("now"),
        )
    )
    params = [
        {
            "cid": cid,
            "n": n,
            "now": now,
            # the first piece of evidence of a new card is already in its base confidence
            "keep": (1 - EVIDENCE_GAIN) ** (n - 1 if is_new else n),
        }
        for cid, (n, is_new) in sorted(counts.items(), key=lambda kv: str(kv[0]))
    ]
    session.connection().execute(stmt, params)
