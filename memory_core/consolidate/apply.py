"""Apply a checked consolidation plan in the caller's transaction, in a few statements."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, cast

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import CursorResult
from sqlmodel import Session, col

from memory_core.cards.confidence import supporting_runs
from memory_core.cards.draft_rows import card_snapshot
from memory_core.cards.profile import refresh_profiles
from memory_core.consolidate.plan import MergePlan
from memory_core.consolidate.rows import CardRow
from memory_core.errors import ConcurrentUpdate
from memory_core.models.card import Card, CardEvidence, CardStatus, CardVersion
from memory_core.models.columns import new_id
from memory_core.redact import redact_value
from memory_core.screen.gate import screen_card

ACTOR = "consolidate"


def apply_plan(session: Session, plan: MergePlan, now: datetime) -> MergePlan:
    """All merges in a few statements: evidence copied, survivors updated, the rest retired,
    history written. A merge or supersession with a card changed since planning is left out
    (the next run plans it again); returns the plan as applied."""
    plan = _still_as_planned(session, plan)
    _supersede(session, plan, now)
    if not plan.merges:
        return plan
    into = {a.card_id: m.survivor.card_id for m in plan.merges for a in m.absorbed}
    _copy_evidence(session, into, now)
    counts = _evidence_counts(session, [m.survivor.card_id for m in plan.merges])
    survivors, retired, history = [], [], []
    for m in plan.merges:
        s, absorbed = m.survivor, m.absorbed
        values = {
            "failure_modes": redact_value(m.failure_modes),  # a merge derives no secret
            "confidence": m.confidence,
            "evidence_count": max(
                counts.get(s.card_id, (0, 0))[0],
                s.evidence_count + sum(a.evidence_count for a in absorbed),
            ),
            # the union of the supporting runs (one behind both cards counts once), not a sum
            "run_count": (
                counts[s.card_id][1]
                if s.card_id in counts
                else max(s.run_count, *(a.run_count for a in absorbed))
            ),
            "use_count": s.use_count + sum(a.use_count for a in absorbed),
            "success_count": s.success_count + sum(a.success_count for a in absorbed),
            "failure_count": s.failure_count + sum(a.failure_count for a in absorbed),
            # the union of modes is screened again: a merge never launders an instruction
            "status": (
                CardStatus.quarantined.value
                if screen_card({"failure_modes": m.failure_modes})
                else CardStatus.active.value
            ),
        }
        survivors.append({"b_id": s.card_id, "b_version": s.version, **values})
        snapshot = card_snapshot({"card_id": s.card_id, "version": s.version + 1, **values})
        snapshot["merged"] = [str(a.card_id) for a in absorbed]
        history.append(
            _version(
                s.card_id,
                s.version + 1,
                snapshot,
                f"merged {len(absorbed)} near-duplicate(s) ({m.why})",
                now,
            )
        )
        for a in absorbed:
            retired.append({"b_id": a.card_id, "b_version": a.version, "by": s.card_id})
            history.append(
                _version(
                    a.card_id,
                    a.version + 1,
                    {"status": CardStatus.superseded.value, "superseded_by": str(s.card_id)},
                    f"merged into {s.card_id} ({m.why})",
                    now,
                )
            )
    guard = (
        col(Card.card_id) == bindparam("b_id"),
        col(Card.version) == bindparam("b_version"),
        col(Card.status) == CardStatus.active.value,
    )
    bumped = {"version": col(Card.version) + 1, "updated_at": now}
    _expect_all(
        session.connection().execute(
            update(Card)
            .where(*guard)
            .values(**{k: bindparam(k) for k in survivors[0] if not k.startswith("b_")}, **bumped),
            survivors,
        ),
        len(survivors),
    )
    _expect_all(
        session.connection().execute(
            update(Card)
            .where(*guard)
            .values(status=CardStatus.superseded.value, superseded_by=bindparam("by"), **bumped),
            retired,
        ),
        len(retired),
    )
    session.connection().execute(insert(CardVersion), history)
    refresh_profiles(session, [m.survivor.card_id for m in plan.merges])
    return plan


# Per-change guards, not "all or nothing": with agents sending uses and feedback all night,
# some card of a plan over thousands is nearly always touched between plan and apply, and
# re-planning the whole namespace (seconds each) lost that race every time. The planned cards
# are locked in key order (as the API's use writer locks them: no deadlock), and a change
# whose cards moved on (a use, a feedback, new evidence, a status) is left for the next run;
# what the API acknowledged is never overwritten with a sum planned before it.
def _still_as_planned(session: Session, plan: MergePlan) -> MergePlan:
    rows = {r.card_id: r for m in plan.merges for r in (m.survivor, *m.absorbed)} | {
        r.card_id: r for s in plan.supersedes for r in (s.older, s.newer)
    }
    if not rows:
        return plan
    ids = sorted(rows)
    now_state: dict[uuid.UUID, tuple[Any, ...]] = {}
    for i in range(0, len(ids), 5000):
        now_state.update(
            (r[0], tuple(r[1:]))
            for r in session.connection().execute(
                select(
                    col(Card.card_id),
                    col(Card.version),
                    col(Card.use_count),
                    col(Card.confidence),
                    col(Card.evidence_count),
                    col(Card.status),
                )
                .where(col(Card.card_id).in_(ids[i : i + 5000]))
                .order_by(col(Card.card_id))
                .with_for_update()
            )
        )
    active = CardStatus.active.value

    def same(*cards: CardRow) -> bool:
        return all(
            now_state.get(c.card_id)
            == (c.version, c.use_count, c.confidence, c.evidence_count, active)
            for c in cards
        )

    return MergePlan(
        merges=[m for m in plan.merges if same(m.survivor, *m.absorbed)],
        supersedes=[x for x in plan.supersedes if same(x.older, x.newer)],
        cards_seen=plan.cards_seen,
        judged=plan.judged,
        unjudged=plan.unjudged,
    )


def _version(
    card_id: uuid.UUID, version: int, snapshot: dict[str, Any], reason: str, now: datetime
) -> dict[str, Any]:
    return {
        "id": new_id(),
        "card_id": card_id,
        "version": version,
        "snapshot": snapshot,
        "reason": reason,
        "actor": ACTOR,
        "created_at": now,
    }


def _expect_all(result: Any, n: int) -> None:
    if cast(CursorResult[Any], result).rowcount != n:
        raise ConcurrentUpdate("cards changed after they were planned; nothing was applied")


def _copy_evidence(session: Session, into: dict[uuid.UUID, uuid.UUID], now: datetime) -> None:
    """The evidence of retired cards, copied to their survivor (originals stay)."""
    dialect = session.get_bind().dialect.name
    ins = (pg_insert if dialect == "postgresql" else sqlite_insert)(CardEvidence)
    ids = list(into)
    for i in range(0, len(ids), 5000):
        rows = session.execute(
            select(CardEvidence).where(col(CardEvidence.card_id).in_(ids[i : i + 5000]))
        ).scalars()
        copies = [
            {
                "id": new_id(),
                "card_id": into[e.card_id],
                "trajectory_id": e.trajectory_id,
                "step": e.step,
                "condition": e.condition,
                "action": e.action,
                "result": e.result,
                "created_at": e.created_at,
            }
            for e in rows
        ]
        if copies:
            session.execute(ins.on_conflict_do_nothing(), copies)


def _evidence_counts(session: Session, ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[int, int]]:
    """(evidence rows, supporting runs) per card."""
    triples: dict[uuid.UUID, list[tuple[uuid.UUID, dict[str, Any]]]] = {}
    for i in range(0, len(ids), 5000):
        for cid, tid, result in session.execute(
            select(
                col(CardEvidence.card_id), col(CardEvidence.trajectory_id), col(CardEvidence.result)
            ).where(col(CardEvidence.card_id).in_(ids[i : i + 5000]))
        ).all():
            triples.setdefault(cid, []).append((tid, result or {}))
    return {cid: (len(t), supporting_runs(t)) for cid, t in triples.items()}


def _supersede(session: Session, plan: MergePlan, now: datetime) -> None:
    """Older cards a newer one contradicts: superseded, pointing at it, with the reason."""
    if not plan.supersedes:
        return
    _expect_all(
        session.connection().execute(
            update(Card)
            .where(
                col(Card.card_id) == bindparam("b_id"),
                col(Card.version) == bindparam("b_version"),
                col(Card.status) == CardStatus.active.value,
            )
            .values(
                status=CardStatus.superseded.value,
                superseded_by=bindparam("by"),
                version=col(Card.version) + 1,
                updated_at=now,
            ),
            [
                {"b_id": s.older.card_id, "b_version": s.older.version, "by": s.newer.card_id}
                for s in plan.supersedes
            ],
        ),
        len(plan.supersedes),
    )
    session.connection().execute(
        insert(CardVersion),
        [
            _version(
                s.older.card_id,
                s.older.version + 1,
                {"status": CardStatus.superseded.value, "superseded_by": str(s.newer.card_id)},
                f"contradicted by the newer card {s.newer.card_id}: {s.reason}",
                now,
            )
            for s in plan.supersedes
        ],
    )
