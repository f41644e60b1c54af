"""The consolidate stage: plan merges of near-duplicate active cards, check, apply atomically;
retire facts contradicted by a newer statement of the same key and query."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import CursorResult, Engine
from sqlmodel import Session, col

from memory_core.cards.writer import card_snapshot
from memory_core.consolidate.plan import CardRow, Merge, MergePlan, check_plan, plan_merges
from memory_core.db import session_scope
from memory_core.embed.base import Embedder
from memory_core.embed.store import ensure_embeddings, load_vectors
from memory_core.errors import ConcurrentUpdate
from memory_core.facts.store import supersede
from memory_core.models.card import Card, CardEvidence, CardKind, CardStatus, CardVersion
from memory_core.models.columns import new_id, utcnow
from memory_core.settings import ConsolidateRules

ACTOR = "consolidate"
_RETRIES = 3


@dataclass
class ConsolidationReport:
    """What one run changed (or, in a dry run, would change)."""

    cards_seen: int = 0
    merges: int = 0
    absorbed: int = 0
    facts_superseded: int = 0
    embedded: int = 0
    similarity: str = "signature + word overlap"
    plan: list[dict[str, Any]] = field(default_factory=list)


def _rows(engine: Engine, namespace: str) -> list[CardRow]:
    with Session(engine) as session:
        cards = session.execute(
            select(Card).where(
                col(Card.namespace) == namespace,
                col(Card.status) == CardStatus.active.value,
                col(Card.kind) == CardKind.experience.value,
            )
        ).scalars()
        return [
            CardRow(
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
            )
            for c in cards
        ]


def consolidate(
    *,
    engine: Engine,
    namespace: str,
    rules: ConsolidateRules,
    embedder: Embedder | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> ConsolidationReport:
    """Merge near-duplicates and retire contradicted facts; re-running changes nothing."""
    report = ConsolidationReport()
    if embedder is not None:
        report.similarity = f"signature + cosine >= {rules.similarity} ({embedder.model})"
        if not dry_run:  # a dry run uses the vectors already stored
            report.embedded = ensure_embeddings(
                engine=engine, embedder=embedder, namespace=namespace
            )
    for _ in range(_RETRIES):
        rows = _rows(engine, namespace)
        vectors = None
        if embedder is not None:
            vectors = load_vectors(engine=engine, model=embedder.model)
        plan = plan_merges(
            rows, vectors=vectors, cosine=rules.similarity, jaccard=rules.lexical_similarity
        )
        check_plan(plan, rows)
        report.cards_seen, report.merges, report.absorbed = (
            len(rows),
            len(plan.merges),
            plan.absorbed,
        )
        report.plan = [
            {
                "survivor": str(m.survivor.card_id),
                "absorbed": [str(a.card_id) for a in m.absorbed],
                "confidence": [m.survivor.confidence, m.confidence],
                "why": m.why,
            }
            for m in plan.merges
        ]
        if dry_run:
            return report
        try:
            with session_scope(engine) as session:
                _apply(session, plan, now or utcnow())
                report.facts_superseded = _retire_contradicted_facts(
                    session, namespace, now or utcnow()
                )
            return report
        except ConcurrentUpdate:
            continue  # a card changed between plan and apply: plan again from fresh rows
    raise ConcurrentUpdate(f"cards of {namespace!r} kept changing during {_RETRIES} attempts")


def _apply(session: Session, plan: MergePlan, now: datetime) -> None:
    for merge in plan.merges:
        _merge(session, merge, now)


def _merge(session: Session, m: Merge, now: datetime) -> None:
    s, absorbed = m.survivor, m.absorbed
    ids = [a.card_id for a in absorbed]
    # evidence first: copied to the survivor (originals stay with the retired cards)
    ins = (pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert)(
        CardEvidence
    )
    ev = session.execute(select(CardEvidence).where(col(CardEvidence.card_id).in_(ids))).scalars()
    copies = [
        {
            "id": new_id(),
            "card_id": s.card_id,
            "trajectory_id": e.trajectory_id,
            "step": e.step,
            "condition": e.condition,
            "action": e.action,
            "result": e.result,
            "created_at": e.created_at,
        }
        for e in ev
    ]
    if copies:
        session.execute(ins.on_conflict_do_nothing(), copies)
    evidence = session.execute(
        select(func.count()).where(col(CardEvidence.card_id) == s.card_id)
    ).scalar_one()
    values = {
        "failure_modes": m.failure_modes,
        "confidence": m.confidence,
        "evidence_count": max(evidence, s.evidence_count + sum(a.evidence_count for a in absorbed)),
        "use_count": s.use_count + sum(a.use_count for a in absorbed),
        "success_count": s.success_count + sum(a.success_count for a in absorbed),
        "failure_count": s.failure_count + sum(a.failure_count for a in absorbed),
        "version": s.version + 1,
        "updated_at": now,
    }
    _guarded_update(session, s.card_id, s.version, values)
    snapshot = card_snapshot({"card_id": s.card_id, **values})
    snapshot["merged"] = [str(i) for i in ids]
    session.add(
        CardVersion(
            card_id=s.card_id,
            version=s.version + 1,
            snapshot=snapshot,
            actor=ACTOR,
            reason=f"merged {len(ids)} near-duplicate(s) ({m.why})",
            created_at=now,
        )
    )
    for a in absorbed:
        _guarded_update(
            session,
            a.card_id,
            a.version,
            {
                "status": CardStatus.superseded.value,
                "superseded_by": s.card_id,
                "version": a.version + 1,
                "updated_at": now,
            },
        )
        session.add(
            CardVersion(
                card_id=a.card_id,
                version=a.version + 1,
                snapshot={"status": CardStatus.superseded.value, "superseded_by": str(s.card_id)},
                actor=ACTOR,
                reason=f"merged into {s.card_id} ({m.why})",
                created_at=now,
            )
        )


def _guarded_update(
    session: Session, card_id: uuid.UUID, version: int, values: dict[str, Any]
) -> None:
    result = session.execute(
        update(Card)
        .where(
            col(Card.card_id) == card_id,
            col(Card.version) == version,
            col(Card.status) == CardStatus.active.value,
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if cast(CursorResult[Any], result).rowcount != 1:
        raise ConcurrentUpdate(f"card {card_id} changed after it was planned")


def _retire_contradicted_facts(session: Session, namespace: str, now: datetime) -> int:
    """Two active facts with the same key and query: the newest statement stays."""
    facts = session.execute(
        select(Card)
        .where(
            col(Card.namespace) == namespace,
            col(Card.kind) == CardKind.fact.value,
            col(Card.status) == CardStatus.active.value,
        )
        .order_by(col(Card.created_at).desc())
    ).scalars()
    newest: dict[tuple[str | None, str | None], Card] = {}
    retired = 0
    for f in facts:
        key = (f.key, f.query)
        if key not in newest:
            newest[key] = f
            continue
        keep = newest[key]
        supersede(
            session,
            f,
            by=keep.card_id,
            actor=ACTOR,
            reason=f"newer statement of {f.key!r}: {keep.value!r} replaces {f.value!r}",
            now=now,
        )
        retired += 1
    return retired


def live_namespaces(*, engine: Engine) -> list[str]:
    """Namespaces that hold active cards."""
    with Session(engine) as session:
        return sorted(
            session.execute(
                select(col(Card.namespace))
                .where(col(Card.status) == CardStatus.active.value)
                .distinct()
            ).scalars()
        )
