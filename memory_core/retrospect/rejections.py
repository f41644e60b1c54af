"""Rejected LLM answers, kept on their run: well-formed but wrong by content (citing a step or
turn the model was not shown, a card for a decision point it was not given, failing a check).
Asking again gets the same answer, so a rejection is never a dead letter: the run is done,
and its marker (`extra["llm_rejected"]`: part, reason, raw answer, run, when) says why for
debugging. One marker a run: a run rejected again is still one rejection, and its marker
counts how many times the same reason came back.

A draft refused on its way to the store is a rejection too: one that failed its grounding
(rejected) or the trust screen (quarantined). Its card is stored with that status and its
reasons (a curator may still release a quarantined one); the run keeps a second marker
(`extra["drafts_rejected"]`: run, when, and each refused draft's status, reasons, scenario
and the raw LLM answer it came from, if any), so the night counts and lists it. So is a
failing card's regeneration that failed them: kept on the card's first run of evidence (the
card stays rejected)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select, update
from sqlmodel import Session, col

from memory_core.facts.marks import with_key
from memory_core.models.card import CardEvidence, CardStatus
from memory_core.models.columns import utcnow
from memory_core.models.drafts import DraftCard
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect.dead_letters import DRAFTS_REJECTED, REJECTED

REPEAT_NOTE = "rejected the same way before: asking again does not cure it"


def keep_rejections(
    session: Session,
    rejected: dict[uuid.UUID, tuple[str, str]],
    run_id: str | None,
    *,
    part: str,
) -> int:
    """Write each run's (reason, raw answer) marker in this transaction; how many of them had
    been rejected the same way (same part, same reason) before."""
    if not rejected:
        return 0
    rows = session.execute(
        select(col(Trajectory.id), col(Trajectory.extra)).where(
            col(Trajectory.id).in_(list(rejected))
        )
    ).all()
    before = {rid: extra for rid, extra in rows}
    dialect, at, again = session.get_bind().dialect.name, utcnow().isoformat(), 0
    for rid, (reason, raw) in rejected.items():
        old = (before.get(rid) or {}).get(REJECTED) or {}
        same = old.get("part") == part and old.get("reason") == reason[:2000]
        again += same
        marker = {
            "part": part,
            "reason": reason[:2000],
            "raw": raw[:4000],
            "run": run_id,
            "at": at,
            "repeats": int(old.get("repeats", 0)) + 1 if same else 0,
        }
        session.execute(
            update(Trajectory)
            .where(col(Trajectory.id) == rid)
            .values(extra=with_key(dialect, REJECTED, marker))
            .execution_options(synchronize_session=False)
        )
    return again


REFUSED = (CardStatus.rejected, CardStatus.quarantined)
KEPT_DRAFTS = 50  # refused drafts kept on one run's marker (the cards keep every one)


def refused(drafts: Sequence[DraftCard]) -> list[DraftCard]:
    """The drafts that failed their grounding or the trust screen (evidence rows are none)."""
    return [d for d in drafts if d.status in REFUSED and not d.evidence_only]


def refused_entry(
    *, status: str, reason: str, raw: str, scenario: str, producer: Any
) -> dict[str, Any]:
    """One refused draft as a run's marker keeps it."""
    return {
        "status": status,
        "reason": (reason or status)[:2000],
        "raw": raw[:4000],
        "scenario": scenario[:300],
        "producer": producer,
    }


def _entry(d: DraftCard) -> dict[str, Any]:
    status = d.status.value if d.status else ""
    return refused_entry(
        status=status,
        reason="; ".join(d.flags),
        raw=d.answer,
        scenario=d.scenario,
        producer=d.provenance.get("producer"),
    )


def keep_refused_drafts(
    session: Session, by_run: Mapping[uuid.UUID, Sequence[DraftCard]], run_id: str | None
) -> int:
    """Write each run's refused drafts on it in this transaction (added to what this same
    flow run kept there before: its rule lessons are written first); how many drafts."""
    found = {rid: [_entry(d) for d in refused(drafts)] for rid, drafts in by_run.items()}
    return keep_refused_entries(session, found, run_id)


def keep_refused_of_cards(
    session: Session, by_card: Mapping[uuid.UUID, dict[str, Any]], run_id: str | None
) -> int:
    """Write refused drafts of stored cards (a regeneration that failed its checks) on each
    card's first run of evidence, in this transaction; how many were kept (a card without
    evidence has no run to keep it on)."""
    q = select(col(CardEvidence.card_id), col(CardEvidence.trajectory_id))
    pairs = session.execute(q.where(col(CardEvidence.card_id).in_(list(by_card)))).all()
    first: dict[uuid.UUID, uuid.UUID] = {}
    for card_id, run in sorted(pairs, key=lambda r: str(r[1])):  # one stable run a card
        first.setdefault(card_id, run)
    found: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for card_id, run in first.items():
        found.setdefault(run, []).append(by_card[card_id])
    return keep_refused_entries(session, found, run_id)


def keep_refused_entries(
    session: Session, found: Mapping[uuid.UUID, Sequence[dict[str, Any]]], run_id: str | None
) -> int:
    """Write each run's refused drafts (as refused_entry makes them) on it in this
    transaction, added to what this same flow run kept there before; how many drafts."""
    found = {rid: out for rid, out in found.items() if out}
    if not found:
        return 0
    rows = session.execute(
        select(col(Trajectory.id), col(Trajectory.extra)).where(col(Trajectory.id).in_(list(found)))
    ).all()
    before = {rid: (extra or {}).get(DRAFTS_REJECTED) or {} for rid, extra in rows}
    dialect, at = session.get_bind().dialect.name, utcnow().isoformat()
    for rid, out in found.items():
        old = before.get(rid) or {}
        kept = list(old.get("drafts") or []) if old.get("run") == run_id else []
        marker = {"run": run_id, "at": at, "drafts": [*kept, *out][:KEPT_DRAFTS]}
        session.execute(
            update(Trajectory)
            .where(col(Trajectory.id) == rid)
            .values(extra=with_key(dialect, DRAFTS_REJECTED, marker))
            .execution_options(synchronize_session=False)
        )
    return sum(len(out) for out in found.values())
