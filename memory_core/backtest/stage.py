"""The gate stage of the nightly: backtest every live experience card of a namespace on its
later runs, store the figures (one row per card), and move the cards the rule
(memory_core.backtest.rule) no longer serves to review, and those it held that pass again
back to active.

Idempotent: the figures are recomputed from the stored runs each time and a row is rewritten
only when they change; a card moves only when its decision and its status disagree, with a
history row saying why. A card the gate sent to review comes back by itself only if no one
else (a person, feedback) changed it since; a card in review for another reason (low
confidence, a streak, a measured harm) is never promoted by the gate.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.backtest.replay import StoredRun, Subject, backtest, stored_run, subject
from memory_core.backtest.rule import Decision, Tally, decide
from memory_core.cards.confidence import run_of
from memory_core.cards.draft_rows import card_snapshot
from memory_core.cards.evidence import group_unit, grouped_evidence
from memory_core.consolidate.apply import ACTOR as CONSOLIDATE
from memory_core.db import read_session, session_scope
from memory_core.models.backtest import CardBacktest
from memory_core.models.card import Card, CardKind, CardStatus, CardVersion
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory
from memory_core.screen.provenance import Origin, origin_of
from memory_core.serve.retrieval import warning_scope
from memory_core.settings_groups import GateSettings

ACTOR = "gate"
MACHINE_ACTORS = frozenset({ACTOR, CONSOLIDATE, "retrospect", "validator"})
APPROVED = "approved in review"  # memory_core.validate.review.decide's history reason
_CHUNK = 500
_LIVE = (CardStatus.active.value, CardStatus.review.value)


class GateReport(BaseModel):
    """What one gate run decided."""

    cards: int = 0  # live experience cards backtested
    served: int = 0
    waiting: int = 0
    to_review: int = 0  # active cards the gate sent to review now
    to_active: int = 0  # cards it had held that pass again
    rewritten: int = 0  # backtest rows written (new or changed figures)
    runs: int = 0  # stored runs replayed


class _Evidence(BaseModel):
    units: set[str] = set()
    names_error: bool = False
    contrast: bool = False
    fix_changes: set[str] = set()  # what the calls that recovered in its runs changed
    fix_confirmed: bool = False


def run_gate(
    *,
    engine: Engine,
    rules: GateSettings,
    namespace: str | None = None,
    now: datetime | None = None,
) -> GateReport:
    """The gate over one namespace (None: every namespace with live experience cards)."""
    report = GateReport()
    if not rules.enabled:
        return report
    with read_session(engine) as session:
        q = (
            select(col(Card.namespace))
            .distinct()
            .where(col(Card.kind) == CardKind.experience.value, col(Card.status).in_(_LIVE))
        )
        if namespace is not None:
            q = q.where(col(Card.namespace) == namespace)
        namespaces = sorted(session.execute(q).scalars())
    for ns in namespaces:
        _gate_namespace(engine, ns, rules, now or utcnow(), report)
    return report


def _gate_namespace(
    engine: Engine, ns: str, rules: GateSettings, now: datetime, report: GateReport
) -> None:
    with read_session(engine) as session:
        cards = list(
            session.execute(
                select(Card).where(
                    col(Card.namespace) == ns,
                    col(Card.kind) == CardKind.experience.value,
                    col(Card.status).in_(_LIVE),
                )
            ).scalars()
        )
        for c in cards:
            session.expunge(c)
        ids = [c.card_id for c in cards]
        evidence = _evidence(session, ids)
        approved = _approvals(session, ids)
        earliest = min((c.created_at for c in cards), default=now)
        runs = _runs(session, ns, since=earliest, limit=rules.max_runs)
        stored = {
            r.card_id: r
            for i in range(0, len(ids), _CHUNK)
            for r in session.execute(
                select(CardBacktest).where(col(CardBacktest.card_id).in_(ids[i : i + _CHUNK]))
            ).scalars()
        }
        for r in stored.values():
            session.expunge(r)
    report.runs += len(runs)
    subjects: list[Subject] = []
    for c in cards:
        ev = evidence.get(c.card_id, _Evidence())
        since = max(c.created_at, approved[c.card_id]) if c.card_id in approved else c.created_at
        names_error = ev.names_error or (not ev.contrast and not ev.units and bool(c.failure_modes))
        subjects.append(subject(c, since=since, names_error=names_error, groups=ev.units))
    tallies = backtest(subjects, runs)
    for s in subjects:
        c = s.card
        ev = evidence.get(c.card_id, _Evidence())
        tally, listed = tallies[c.card_id]
        decision = decide(
            groups=len(ev.units),
            written_by_operator=origin_of(c.provenance) is Origin.operator,
            approved=c.card_id in approved,
            replayable=s.replayable,
            unconfirmed_fix=_teaches_fix(c, ev) and not ev.fix_confirmed,
            tally=tally,
            rules=rules,
            reminder=s.names_error and warning_scope(s.compiled) == "tool",
        )
        report.cards += 1
        report.served += decision.serve
        report.waiting += not decision.serve
        old = stored.get(c.card_id)
        _apply(engine, c, s, ev, tally, listed, decision, old, now, report, rules.promote_confirmed)


def _apply(
    engine: Engine,
    card: Card,
    s: Subject,
    ev: _Evidence,
    tally: Tally,
    listed: list[dict[str, Any]],
    decision: Decision,
    old: CardBacktest | None,
    now: datetime,
    report: GateReport,
    promote: bool = False,
) -> None:
    """Write one card's figures and move it, if its decision and status disagree."""
    values: dict[str, Any] = {
        "namespace": card.namespace,
        "groups": len(ev.units),
        "operator": origin_of(card.provenance) is Origin.operator,
        "checked": tally.checked,
        "fired": tally.fired,
        "right": tally.right,
        "wrong": tally.wrong,
        "low": decision.low,
        "measured": decision.measured,
        "replayable": s.replayable,
        "serve": decision.serve,
        "reason": decision.reason,
        "runs": listed,
        "held_version": old.held_version if old is not None else None,
    }
    move: str | None = None
    if card.status == CardStatus.active.value and not decision.serve:
        move = CardStatus.review.value
    elif (
        card.status == CardStatus.review.value
        and decision.serve
        and (
            (old is not None and old.held_version is not None)
            or (promote and decision.confirmed and _held_for_confidence(engine, card))
        )
    ):
        move = CardStatus.active.value
    if card.status == CardStatus.active.value and decision.serve:
        values["held_version"] = None
    unchanged = old is not None and all(getattr(old, k) == v for k, v in values.items())
    if unchanged and move is None:
        return
    with session_scope(engine) as session:
        held = old is not None and old.held_version is not None
        if move == CardStatus.active.value and held and _touched_since(session, card, old):
            move = None  # someone else handled it meanwhile: a person decides now
            values["held_version"] = None
        if move is not None:
            moved = session.execute(
                update(Card)
                .where(col(Card.card_id) == card.card_id, col(Card.version) == card.version)
                .values(status=move, version=card.version + 1, updated_at=now)
            )
            if moved.rowcount == 1:  # type: ignore[attr-defined]
                card.status, card.version = move, card.version + 1
                what = "sent to review" if move == CardStatus.review.value else "served again"
                session.add(
                    CardVersion(
                        card_id=card.card_id,
                        version=card.version,
                        snapshot=card_snapshot(card.model_dump()),
                        reason=f"backtest: {what}: {decision.reason}",
                        actor=ACTOR,
                        created_at=now,
                    )
                )
                values["held_version"] = card.version if move == CardStatus.review.value else None
                if move == CardStatus.review.value:
                    report.to_review += 1
                else:
                    report.to_active += 1
        session.merge(CardBacktest(card_id=card.card_id, computed_at=now, **values))
        report.rewritten += 1


def _teaches_fix(card: Card, ev: _Evidence) -> bool:
    """Whether the card teaches a recovery seen in its runs (a step or a handling names what the
    call that succeeded after the failure changed): a fix, which only a run that took it and
    went on to succeed confirms."""
    texts = [str(step.get("note", "")) for step in card.action_sequence]
    texts += [str(fm.get("handling", "")) for fm in card.failure_modes]
    return any(change in text for change in ev.fix_changes for text in texts)


def _held_for_confidence(engine: Engine, card: Card) -> bool:
    """In review only because validation found its confidence low: its last change is the
    validator's, and no one but the machine stages changed it after it was written."""
    with read_session(engine) as session:
        rows = session.execute(
            select(col(CardVersion.actor), col(CardVersion.reason))
            .where(col(CardVersion.card_id) == card.card_id, col(CardVersion.version) > 1)
            .order_by(col(CardVersion.version))
        ).all()
    return (
        bool(rows)
        and all(actor in MACHINE_ACTORS for actor, _ in rows)
        and rows[-1][0] == "validator"
        and "confidence below" in (rows[-1][1] or "")
    )


def _touched_since(session: Session, card: Card, old: CardBacktest | None) -> bool:
    """Whether anyone but the machine stages changed the card since the gate held it."""
    if old is None or old.held_version is None:
        return True
    n = session.execute(
        select(func.count())
        .select_from(CardVersion)
        .where(
            col(CardVersion.card_id) == card.card_id,
            col(CardVersion.version) > old.held_version,
            col(CardVersion.actor).not_in(sorted(MACHINE_ACTORS)),
        )
    ).scalar_one()
    return bool(n)


def _evidence(session: Session, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, _Evidence]:
    """Per card: the task groups of its supporting runs (a run naming none is its own), whether
    it names an error, the recoveries seen in its runs and whether a run that recovered went on
    to succeed."""
    out: dict[uuid.UUID, _Evidence] = defaultdict(_Evidence)
    for cid, tid, result, group in grouped_evidence(session, ids):
        result = result or {}
        ev = out[cid]
        ev.contrast = ev.contrast or "contrast" in result
        run = run_of(result)
        if run is None or not run.supports:
            continue
        ev.units.add(group_unit(group, run, tid))
        ev.names_error = ev.names_error or bool(
            result.get("error") or result.get("error_signature")
        )
        if result.get("recovered"):
            took = result.get("succeeded_with")
            changed = took.get("changed") if isinstance(took, dict) else None
            if isinstance(changed, list):
                ev.fix_changes.update(str(x) for x in changed if x)
            ev.fix_confirmed = ev.fix_confirmed or run.outcome == "success"
    return dict(out)


def _approvals(session: Session, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, datetime]:
    """When a person last approved each card in review (its history says so)."""
    out: dict[uuid.UUID, datetime] = {}
    for i in range(0, len(ids), _CHUNK):
        rows = session.execute(
            select(col(CardVersion.card_id), func.max(col(CardVersion.created_at)))
            .where(
                col(CardVersion.card_id).in_(ids[i : i + _CHUNK]),
                col(CardVersion.reason).startswith(APPROVED),
            )
            .group_by(col(CardVersion.card_id))
        ).all()
        out.update({cid: at for cid, at in rows})
    return out


def _runs(session: Session, ns: str, *, since: datetime, limit: int) -> list[StoredRun]:
    """The namespace's latest runs stored after `since`, parsed for replay."""
    t = Trajectory
    rows = session.execute(
        select(
            col(t.id),
            col(t.key),
            col(t.created_at),
            col(t.outcome),
            col(t.task_type),
            col(t.agent_id),
            col(t.steps),
            col(t.task_group),
        )
        .where(col(t.namespace) == ns, col(t.created_at) > since)
        .order_by(col(t.created_at).desc(), col(t.id))
        .limit(limit)
    ).all()
    return [
        stored_run(
            id=r[0],
            key=r[1],
            created_at=r[2],
            outcome=r[3],
            task_type=r[4],
            agent_id=r[5],
            steps=r[6] or [],
            task_group=r[7],
        )
        for r in rows
    ]
