"""The consolidate stage: plan merges of near-duplicate active cards, check, apply atomically;
retire facts contradicted by a newer statement of the same key and query."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import CursorResult, Engine
from sqlmodel import Session, col

from memory_core.cards.writer import card_snapshot
from memory_core.consolidate.plan import CardRow, MergePlan, check_plan, plan_merges
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
    """All merges in a few statements: evidence copied, survivors updated, the rest retired,
    history written; any card that changed since planning aborts everything."""
    if not plan.merges:
        return
    into = {a.card_id: m.survivor.card_id for m in plan.merges for a in m.absorbed}
    _copy_evidence(session, into, now)
    counts = _evidence_counts(session, [m.survivor.card_id for m in plan.merges])
    survivors, retired, history = [], [], []
    for m in plan.merges:
        s, absorbed = m.survivor, m.absorbed
        values = {
            "failure_modes": m.failure_modes,
            "confidence": m.confidence,
            "evidence_count": max(
                counts.get(s.card_id, 0), s.evidence_count + sum(a.evidence_count for a in absorbed)
            ),
            "use_count": s.use_count + sum(a.use_count for a in absorbed),
            "success_count": s.success_count + sum(a.success_count for a in absorbed),
            "failure_count": s.failure_count + sum(a.failure_count for a in absorbed),
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


def _evidence_counts(session: Session, ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    out: dict[uuid.UUID, int] = {}
    for i in range(0, len(ids), 5000):
        out.update(
            session.execute(
                select(col(CardEvidence.card_id), func.count())
                .where(col(CardEvidence.card_id).in_(ids[i : i + 5000]))
                .group_by(col(CardEvidence.card_id))
            ).all()
        )
    return out


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
