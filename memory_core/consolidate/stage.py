"""The consolidate stage: plan merges of near-duplicate active cards, check, apply atomically;
retire facts contradicted by a newer statement of the same key and query."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.evidence import runs_by_card
from memory_core.consolidate.apply import ACTOR, apply_plan
from memory_core.consolidate.plan import MergePlan, check_plan, plan_merges
from memory_core.consolidate.rows import CardRow, PairJudge
from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.db import session_scope
from memory_core.embed.base import Embedder
from memory_core.embed.store import ensure_embeddings, load_vectors
from memory_core.errors import ConcurrentUpdate
from memory_core.facts.store import supersede
from memory_core.models.card import Card, CardKind, CardStatus, FactStanding
from memory_core.models.columns import utcnow
from memory_core.settings import ConsolidateRules

_RETRIES = 3
DEFERRED_LISTED = 100  # the deferred changes a report names (it counts them all)


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
                c.signature,
                c.run_count,
            )
            for c in cards
        ]


CONSOLIDATE_STEPS = 3  # embedded, planned, applied


def consolidate(
    *,
    engine: Engine,
    namespace: str,
    rules: ConsolidateRules,
    embedder: Embedder | None = None,
    judge: PairJudge | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    deferred_limit: int = DEFERRED_LISTED,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> ConsolidateSummary:
    """Merge near-duplicates and retire contradicted facts; re-running changes nothing.

    A change whose cards others changed after planning waits for the next run: counted in
    report.deferred, the first deferred_limit named by survivor in report.deferred_ids.
    on_progress, when given, hears each step: (what, done, total) in CONSOLIDATE_STEPS."""

    def step(what: str, done: int) -> None:
        if on_progress is not None:
            on_progress(what, done, CONSOLIDATE_STEPS)

    report = ConsolidateSummary(
        namespaces=1, dry_run=dry_run, similarity="signature + word overlap"
    )
    if embedder is not None:
        report.similarity = f"signature + cosine >= {rules.similarity} ({embedder.model})"
        if not dry_run:  # a dry run uses the vectors already stored
            step("embedding the cards", 0)
            report.embedded = ensure_embeddings(
                engine=engine, embedder=embedder, namespace=namespace
            )
    for _ in range(_RETRIES):
        step("reading the cards", 1)
        rows = _rows(engine, namespace)
        step(f"planning merges over {len(rows)} cards", 1)
        vectors = None
        if embedder is not None:
            vectors = load_vectors(engine=engine, model=embedder.model)
        plan = plan_merges(
            rows,
            vectors=vectors,
            cosine=rules.similarity,
            jaccard=rules.lexical_similarity,
            judge=judge,
            judge_floor=rules.judge_floor,
            judge_floor_words=rules.lexical_judge_floor,
            max_judged=rules.max_judged,
            runs=runs_by_card(engine=engine, card_ids=[r.card_id for r in rows]),
        )
        check_plan(plan, rows)
        report.cards_seen, report.merges, report.absorbed = (
            len(rows),
            len(plan.merges),
            plan.absorbed,
        )
        report.judged, report.unjudged = plan.judged, plan.unjudged
        report.superseded = len(plan.supersedes)
        report.plan = [
            {
                "survivor": str(m.survivor.card_id),
                "absorbed": [str(a.card_id) for a in m.absorbed],
                "confidence": [m.survivor.confidence, m.confidence],
                "why": m.why,
            }
            for m in plan.merges
        ] + [
            {
                "survivor": str(x.newer.card_id),
                "supersedes": str(x.older.card_id),
                "why": f"contradicts: {x.reason}",
            }
            for x in plan.supersedes
        ]
        planned = len(plan.merges) + len(plan.supersedes)
        if dry_run:
            step(f"{planned} changes planned, none written", CONSOLIDATE_STEPS)
            return report
        step(f"applying {planned} changes", 2)
        try:
            with session_scope(engine) as session:
                applied = apply_plan(session, plan, now or utcnow())
                report.merges, report.absorbed = len(applied.merges), applied.absorbed
                report.superseded = len(applied.supersedes)
                report.deferred = (
                    len(plan.merges) + len(plan.supersedes) - report.merges - report.superseded
                )
                report.deferred_ids = _deferred(plan, applied)[: max(deferred_limit, 0)]
                report.facts_superseded = _retire_contradicted_facts(
                    session, namespace, now or utcnow()
                )
            step(f"{report.merges + report.superseded} changes applied", CONSOLIDATE_STEPS)
            return report
        except ConcurrentUpdate:
            continue  # a card changed between plan and apply: plan again from fresh rows
    raise ConcurrentUpdate(f"cards of {namespace!r} kept changing during {_RETRIES} attempts")


def _deferred(plan: MergePlan, applied: MergePlan) -> list[uuid.UUID]:
    """The survivor of each planned change that was not applied (apply_plan keeps the
    planned objects it applies)."""
    kept = {id(m) for m in applied.merges} | {id(x) for x in applied.supersedes}
    return [m.survivor.card_id for m in plan.merges if id(m) not in kept] + [
        x.newer.card_id for x in plan.supersedes if id(x) not in kept
    ]


def _retire_contradicted_facts(session: Session, namespace: str, now: datetime) -> int:
    """Two active facts with the same key and query: the newest statement stays, though never a
    claim (a speaker's word alone) over a value more than a speaker stands behind."""
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
    # the stronger first, the newest first within each (the query's order is kept by sort)
    ranked = sorted(facts, key=lambda f: f.standing == FactStanding.claim.value)
    for f in ranked:
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
