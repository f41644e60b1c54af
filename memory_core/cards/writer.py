"""Write card drafts: one live card per signature, evidence appended idempotently."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col

from memory_core.cards.confidence import confidence_of
from memory_core.models.card import (
    LIVE_STATUSES,
    Card,
    CardEvidence,
    CardStatus,
    CardVersion,
    EvidenceTriple,
)
from memory_core.models.columns import new_id, utcnow
from memory_core.preconditions import compile_all
from memory_core.redact import redact, redact_value
from memory_core.retrospect.drafts import DraftCard
from memory_core.screen.gate import screen_draft

_LIVE_SQL = text("status IN ('draft', 'review', 'active', 'quarantined')")


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
    new_rows: set[uuid.UUID] = set()
    if ev_rows:  # an executemany of no rows would insert one empty row
        returned = session.execute(
            ev_ins.returning(col(CardEvidence.card_id), col(CardEvidence.id)), ev_rows
        ).all()
        for cid, eid in returned:
            added[cid] += 1
            new_rows.add(eid)
    stated = {ids[sig]: d.evidence for sig, d in by_sig.items() if ids[sig] in created}
    _bump(session, added, new_rows, stated, now)
    return WriteResult(created=len(created), evidence_added=sum(added.values()))


def _reason(row: dict[str, Any]) -> str:
    flags = row["provenance"].get("flags")
    if row["status"] in (CardStatus.quarantined.value, CardStatus.rejected.value) and flags:
        return f"{row['status']} by retrospection: " + "; ".join(flags)
    return "created by retrospection"


def _bump(
    session: Session,
    added: dict[uuid.UUID, int],
    new_rows: set[uuid.UUID],
    stated: dict[uuid.UUID, list[EvidenceTriple]],
    now: Any,
) -> None:
    """Count new evidence and move each card's confidence by what the new runs change in the
    evidence estimate (memory_core.cards.confidence); feedback and decay offsets are kept."""
    if not added:
        return
    rows = session.execute(
        select(
            col(CardEvidence.card_id),
            col(CardEvidence.id),
            col(CardEvidence.trajectory_id),
            col(CardEvidence.result),
        ).where(col(CardEvidence.card_id).in_(list(added)))
    ).all()
    every: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]] = defaultdict(list)
    before: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]] = defaultdict(list)
    for cid, eid, tid, result in rows:
        every[cid].append((tid, result or {}))
        if eid not in new_rows:
            before[cid].append((tid, result or {}))
    for cid, triples in stated.items():  # a new card's stated confidence came from its draft
        before[cid] = [(t.trajectory_id, t.result) for t in triples]
    current = dict(
        session.execute(
            select(col(Card.card_id), col(Card.confidence)).where(
                col(Card.card_id).in_(list(added))
            )
        )
        .tuples()
        .all()
    )
    params = []
    for cid, n in sorted(added.items(), key=lambda kv: str(kv[0])):
        shift = confidence_of(every[cid]) - confidence_of(before[cid]) if before[cid] else 0.0
        value = min(max(current[cid] + shift, 0.0), 1.0)
        params.append({"cid": cid, "n": n, "now": now, "conf": round(value, 6)})
    stmt = (
        update(Card)
        .where(col(Card.card_id) == bindparam("cid"))
        .values(
            evidence_count=col(Card.evidence_count) + bindparam("n"),
            confidence=bindparam("conf"),
            updated_at=bindparam("now"),
        )
    )
    session.connection().execute(stmt, params)
