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

from memory_core.cards.confidence import (
    confidence_of,
    estimate,
    favoured,
    runs_of,
    supporting_runs,
)
from memory_core.cards.draft_rows import (
    OFFSET,
    RowSpec,
    card_row,
    columns,
    first_version,
    prefer_better_drafts,
)
from memory_core.cards.profile import refresh_profiles
from memory_core.models.card import (
    LIVE_SQL,
    Card,
    CardEvidence,
    CardStatus,
    CardVersion,
)
from memory_core.models.columns import new_id, utcnow
from memory_core.models.drafts import DraftCard
from memory_core.redact import redact_value
from memory_core.screen.gate import screen_draft

_LIVE_SQL = text(LIVE_SQL)


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
    spec = RowSpec(namespace, status, provenance, now, max_expression_chars, max_expression_depth)
    rows = [card_row(sig, group, spec) for sig, group in grouped.items()]
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
            ins.returning(col(Card.card_id), col(Card.signature)), [columns(r) for r in rows]
        ).all()
    }
    if created:
        session.execute(
            _insert(session, CardVersion),
            [first_version(by_sig[str(r.signature)], cid, now) for cid, r in created.items()],
        )
    ids: dict[str, uuid.UUID] = {str(r.signature): r.card_id for r in created.values()}
    existing = [by_sig[s] for s in by_sig if s not in ids]
    redone: set[uuid.UUID] = set()
    if existing:
        found, redone = prefer_better_drafts(session, namespace, existing, now)
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


def _bump(
    session: Session,
    added: dict[uuid.UUID, int],
    new_rows: set[uuid.UUID],
    stated: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]],
    redone: set[uuid.UUID],
    now: Any,
) -> None:
    """Count new evidence rows and the distinct runs, and set each card's confidence from the
    evidence estimate (memory_core.cards.confidence): a card untouched since retrospection
    wrote it gets the estimate over all its runs plus its draft's offset; a card validated,
    reviewed or used since moves by what the new runs change, so feedback and decay offsets
    are kept."""
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
        runs = supporting_runs(every[cid])  # recounted, not incremented: re-runs are idempotent
        params.append(
            {"cid": cid, "n": added.get(cid, 0), "runs": runs, "now": now, "conf": round(value, 6)}
        )
    stmt = (
        update(Card)
        .where(col(Card.card_id) == bindparam("cid"))
        .values(
            evidence_count=col(Card.evidence_count) + bindparam("n"),
            run_count=bindparam("runs"),
            confidence=bindparam("conf"),
            updated_at=bindparam("now"),
        )
    )
    session.connection().execute(stmt, params)
    refresh_profiles(session, touched)
    _review_unfavoured(session, every, before, now)


def _review_unfavoured(
    session: Session,
    every: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]],
    before: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]],
    now: Any,
) -> None:
    """An active card whose evidence favoured it before this write and no longer does (as many
    tasks against it as for it, e.g. a caution that successful runs of other tasks contradict)
    goes back to review, with a version saying why. Validation decides status only for drafts:
    without this a contradicted lesson stayed served. One an operator approved while already
    unfavoured is left as approved."""
    turned = [c for c in every if before.get(c) and favoured(before[c]) and not favoured(every[c])]
    if not turned:
        return
    active = session.execute(
        select(col(Card.card_id), col(Card.version)).where(
            col(Card.card_id).in_(turned), col(Card.status) == CardStatus.active.value
        )
    ).all()
    for cid, version in sorted(active, key=lambda r: str(r[0])):
        e = estimate(runs_of(every[cid]))
        session.execute(
            update(Card)
            .where(col(Card.card_id) == cid)
            .values(status=CardStatus.review.value, version=version + 1, updated_at=now)
        )
        session.execute(
            _insert(session, CardVersion),
            [
                {
                    "id": new_id(),
                    "card_id": cid,
                    "version": version + 1,
                    "snapshot": {
                        "status": CardStatus.review.value,
                        "supporting": e.supporting,
                        "contradicting": e.contradicting,
                    },
                    "reason": (
                        f"evidence no longer favours it ({e.supporting} tasks or runs for, "
                        f"{e.contradicting} against): sent to review"
                    ),
                    "actor": "retrospect",
                    "created_at": now,
                }
            ],
        )
