"""Write card drafts: one live card per signature, evidence appended idempotently.

Several runs (or task groups) often teach the same lesson in other words: the same
signature with another recovery note or argument template. Which of them a card shows must
not depend on the order the runs were claimed in (batch sizes, a killed worker, another
ingest order), so every draft has a rank (`draft_rank`: clean before quarantined, higher
stated confidence first, then a digest of its content) and a card nobody has touched since
retrospection wrote it (version 1, still a draft or quarantined) shows its best-ranked draft
whatever the order. Its confidence is likewise the evidence estimate over every run, plus the
draft's own offset from it (an LLM's stated confidence), never a sum of per-batch shifts.
"""

from __future__ import annotations

import hashlib
import json
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
)
from memory_core.models.columns import new_id, utcnow
from memory_core.preconditions import compile_all
from memory_core.redact import redact, redact_value
from memory_core.retrospect.drafts import DraftCard
from memory_core.screen.gate import screen_draft

_LIVE_SQL = text("status IN ('draft', 'review', 'active', 'quarantined')")
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
    grouped: dict[str, list[DraftCard]] = defaultdict(list)
    evidence: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in drafts:
        # a rejected draft is a record of a bad answer, not a lesson to merge with others
        sig = d.signature if d.status is not CardStatus.rejected else f"rejected-{uuid.uuid4()}"
        grouped[sig].append(d)
        evidence[sig].extend(e.model_dump(mode="json") for e in d.evidence)
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for sig, group in grouped.items():
        rows.append(
            _card_row(
                sig,
                group,
                namespace,
                status,
                provenance,
                now,
                max_expression_chars,
                max_expression_depth,
            )
        )
    by_sig = {r["signature"]: r for r in rows}
    # every write takes its row locks in one global order (signature, then card id), so
    # concurrent workers wait for each other instead of deadlocking (seen on PostgreSQL)
    rows.sort(key=lambda r: r["signature"])
    ins = _insert(session, Card).on_conflict_do_nothing(
        index_elements=["namespace", "signature"], index_where=_LIVE_SQL
    )
    created = {
        r.card_id: r
        for r in session.execute(
            ins.returning(col(Card.card_id), col(Card.signature)), [_columns(r) for r in rows]
        ).all()
    }
    if created:
        session.execute(
            _insert(session, CardVersion),
            [_first_version(by_sig[str(r.signature)], cid, now) for cid, r in created.items()],
        )
    ids: dict[str, uuid.UUID] = {str(r.signature): r.card_id for r in created.values()}
    existing = [by_sig[s] for s in by_sig if s not in ids]
    redone: set[uuid.UUID] = set()
    if existing:
        found, redone = _prefer_better_drafts(session, namespace, existing, now)
        ids.update(found)
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
    stated = {ids[sig]: r["_stated"] for sig, r in by_sig.items() if ids[sig] in created}
    _bump(session, added, new_rows, stated, redone, now)
    return WriteResult(created=len(created), evidence_added=sum(added.values()))


def _rank(d: DraftCard) -> str:
    """Order-free choice among drafts of one lesson: clean first, then the higher stated
    confidence, then the content itself (a digest), so any arrival order picks the same."""
    flagged = d.status is CardStatus.quarantined
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
    return f"{int(flagged)}|{1.0 - d.confidence:.6f}|{digest}"


def _card_row(
    sig: str,
    group: Sequence[DraftCard],
    namespace: str,
    status: CardStatus,
    provenance: dict[str, Any],
    now: Any,
    max_chars: int,
    max_depth: int,
) -> dict[str, Any]:
    """The card row for one signature: its best-ranked draft (evidence-only drafts rank none)."""
    ranked = [(_rank(d), d) for d in group if not d.evidence_only]
    if not ranked:  # evidence for a stored card: never its content
        row = _row(sig, group[0], namespace, status, provenance, now, max_chars, max_depth)
        row["provenance"].pop(RANK, None)
        return row
    rank, best = min(ranked, key=lambda rd: rd[0])
    row = _row(sig, best, namespace, status, provenance, now, max_chars, max_depth)
    row["provenance"][RANK] = rank
    return row


def _row(
    sig: str,
    d: DraftCard,
    namespace: str,
    status: CardStatus,
    provenance: dict[str, Any],
    now: Any,
    max_chars: int,
    max_depth: int,
) -> dict[str, Any]:
    if d.status is CardStatus.rejected:
        sources = list(d.preconditions)  # kept as written: why it was rejected
    else:
        sources = [
            c.source for c in compile_all(d.preconditions, max_chars=max_chars, max_depth=max_depth)
        ]
    stated = [(t.trajectory_id, t.result) for t in d.evidence]
    row: dict[str, Any] = {
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
            # the draft's own word beside the evidence estimate (0 for rule drafts)
            OFFSET: round(d.confidence - confidence_of(stated), 6) if stated else 0.0,
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
    row["_stated"] = stated  # not a column: the evidence the stated confidence came from
    return row


def _columns(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("_")}


def _first_version(row: dict[str, Any], card_id: uuid.UUID, now: Any) -> dict[str, Any]:
    return {
        "id": new_id(),
        "card_id": card_id,
        "version": 1,
        "snapshot": card_snapshot({**_columns(row), "card_id": card_id}),
        "reason": _reason(row),
        "actor": str(row["provenance"].get("producer", "unknown")),
        "created_at": now,
    }


def _prefer_better_drafts(
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
        first = _first_version(row, card_id, now)
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


def _bump(
    session: Session,
    added: dict[uuid.UUID, int],
    new_rows: set[uuid.UUID],
    stated: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]],
    redone: set[uuid.UUID],
    now: Any,
) -> None:
    """Count new evidence and set each card's confidence from the evidence estimate
    (memory_core.cards.confidence): a card untouched since retrospection wrote it gets the
    estimate over all its runs plus its draft's offset; a card validated, reviewed or used
    since moves by what the new runs change, so feedback and decay offsets are kept."""
    touched = set(added) | redone
    if not touched:
        return
    rows = session.execute(
        select(
            col(CardEvidence.card_id),
            col(CardEvidence.id),
            col(CardEvidence.trajectory_id),
            col(CardEvidence.result),
        ).where(col(CardEvidence.card_id).in_(list(touched)))
    ).all()
    every: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]] = defaultdict(list)
    before: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]] = defaultdict(list)
    for cid, eid, tid, result in rows:
        every[cid].append((tid, result or {}))
        if eid not in new_rows:
            before[cid].append((tid, result or {}))
    for cid, triples in stated.items():  # a new card's stated confidence came from its draft
        before[cid] = list(triples)
    cards = {
        cid: (conf, version, prov or {})
        for cid, conf, version, prov in session.execute(
            select(
                col(Card.card_id), col(Card.confidence), col(Card.version), col(Card.provenance)
            ).where(col(Card.card_id).in_(list(touched)))
        ).all()
    }
    params = []
    for cid in sorted(touched, key=str):
        current, version, prov = cards[cid]
        if version == 1 and OFFSET in prov:
            value = float(prov[OFFSET]) + confidence_of(every[cid])
        else:
            shift = confidence_of(every[cid]) - confidence_of(before[cid]) if before[cid] else 0.0
            value = current + shift
        value = min(max(value, 0.0), 1.0)
        params.append({"cid": cid, "n": added.get(cid, 0), "now": now, "conf": round(value, 6)})
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
