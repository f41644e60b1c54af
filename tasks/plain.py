"""The stage bodies the Prefect tasks run, without Prefect: the same call, log and summary.

The tasks wrap these (adding retries, names and the run logger); the CLI calls them directly
when no Prefect API is configured, so a stage command on a small store answers at once
instead of starting a temporary Prefect server. Nothing here imports Prefect.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from memory_core.decay import Change, DecayParams, run_decay
from memory_core.embed.base import Embedder
from memory_core.retrospect.stage import BatchResult
from memory_core.settings import Settings
from tasks.runtime import engine_for

Log = logging.Logger | logging.LoggerAdapter[Any]
_log = logging.getLogger("hindsight.stages")


class ValidationSummary(BaseModel):
    """What one validation run decided."""

    evaluated: int = 0
    activated: int = 0
    review: int = 0
    rejected: int = 0
    rule_failures: dict[str, int] = {}
    docs_index: str | None = None


def validate_run(namespace: str | None, settings: Settings, log: Log = _log) -> ValidationSummary:
    """Drafts -> active / review / rejected; the report and Data Docs under the data dir."""
    from memory_core.validate.stage import validate_drafts

    report = validate_drafts(
        regenerate=_regenerator(settings),
        engine=engine_for(settings),
        reports_dir=settings.reports_dir,
        namespace=namespace,
        registry=frozenset(settings.tool_registry) if settings.tool_registry else None,
        review_below=settings.review_below,
    )
    log.info(
        "validated %d drafts: %d active, %d to review, %d rejected",
        report.evaluated,
        report.activated,
        report.review,
        report.rejected,
    )
    for rule, n in report.rule_failures.items():
        log.warning("%d card(s) failed %r", n, rule)
    return ValidationSummary(
        evaluated=report.evaluated,
        activated=report.activated,
        review=report.review,
        rejected=report.rejected,
        rule_failures=report.rule_failures,
        docs_index=report.docs_index,
    )


def _regenerator(settings: Settings) -> Any:
    """With an LLM configured, a rejected LLM draft gets one regeneration attempt."""
    if not settings.llm_base_url:  # the openai package is only imported when it is used
        return None
    from memory_core.retrospect.factory import build_llm
    from memory_core.validate.regenerate import llm_regenerator

    llm = build_llm(settings)
    return llm_regenerator(llm) if llm is not None else None


class DecaySummary(BaseModel):
    """What one decay run changed (dry run: would change, with the plan listed)."""

    run_id: uuid.UUID | None = None
    now: datetime | None = None
    dry_run: bool = False
    decayed: int = 0
    archived_unused: int = 0
    archived_cap: int = 0
    changes: list[Change] = []


def decay_run(
    params: DecayParams, namespace: str | None, settings: Settings, log: Log = _log
) -> DecaySummary:
    """Plan the rules, then (unless a dry run) apply them in one transaction."""
    report = run_decay(
        engine=engine_for(settings), params=params, weights=settings.ranking, namespace=namespace
    )
    log.info(
        "%s: %d cards faded, %d archived as unused, %d archived over the cap",
        "dry run" if params.dry_run else "decay",
        report.counts["decay"],
        report.counts["unused"],
        report.counts["cap"],
    )
    return DecaySummary(
        run_id=None if params.dry_run else report.run_id,
        now=report.now,
        dry_run=params.dry_run,
        decayed=report.counts["decay"],
        archived_unused=report.counts["unused"],
        archived_cap=report.counts["cap"],
        changes=report.changes,
    )


class BatchSummary(BaseModel):
    """Counts of one retrospect batch."""

    claimed: int = 0
    done: int = 0
    dead_letters: int = 0
    deferred: int = 0
    cards_created: int = 0
    evidence_added: int = 0
    llm_calls: int = 0
    tokens_sent: int = 0
    tokens_received: int = 0
    tokens_saved: int = 0

    @classmethod
    def of(cls, result: BatchResult) -> BatchSummary:
        """The counts of a stage result."""
        return cls(**{k: getattr(result, k) for k in cls.model_fields})


def retrospect_rule_batch(
    namespace: str | None, worker: str, settings: Settings, log: Log = _log
) -> BatchSummary:
    """Claim up to batch_size trajectories, write their cards, and mark them done together."""
    from memory_core.retrospect.rule_extractor import RuleExtractor
    from memory_core.retrospect.stage import retrospect_once

    result = retrospect_once(
        engine=engine_for(settings),
        extractor=RuleExtractor(default_task_type=settings.default_task_type),
        worker=worker,
        batch_size=settings.retrospect_batch_size,
        lease=timedelta(seconds=settings.lease_seconds),
        namespace=namespace,
    )
    for err in result.errors:
        log.error("dead letter: %s", err)
    if result.claimed:
        log.info(
            "%d trajectories, %d new cards, %d evidence rows, %d dead letters",
            result.claimed,
            result.cards_created,
            result.evidence_added,
            result.dead_letters,
        )
    return BatchSummary.of(result)


class ConsolidateSummary(BaseModel):
    """What consolidation changed (dry run: would change, with the plan)."""

    namespaces: int = 0
    cards_seen: int = 0
    merges: int = 0
    absorbed: int = 0
    superseded: int = 0
    judged: int = 0
    unjudged: int = 0
    facts_superseded: int = 0
    embedded: int = 0
    similarity: str = ""
    index: str = ""  # how the vector index was brought in line (or why it was not)
    dry_run: bool = False
    plan: list[dict[str, Any]] = []

    def add(self, other: ConsolidateSummary) -> None:
        """Count another namespace in."""
        self.namespaces += other.namespaces
        for name in (
            "cards_seen",
            "merges",
            "absorbed",
            "superseded",
            "judged",
            "unjudged",
            "facts_superseded",
            "embedded",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.similarity = other.similarity or self.similarity
        self.index = "; ".join(x for x in (self.index, other.index) if x)
        self.plan += other.plan


@lru_cache(maxsize=2)
def _embedder(settings_json: str) -> Embedder | None:
    from memory_core.embed.factory import build_embedder

    # one model per process: loading it takes a while
    return build_embedder(Settings.model_validate_json(settings_json))


def embedder_for(settings: Settings) -> Embedder | None:
    """The process's embedder for these settings (None: signature and word overlap only)."""
    return _embedder(settings.model_dump_json())


def _judge(settings: Settings) -> Any:
    """With an LLM configured, it judges pairs alike but not clearly the same lesson."""
    if not settings.llm_base_url:  # the openai package is only imported when it is used
        return None
    from memory_core.consolidate.judge import llm_judge
    from memory_core.llm.cache import SQLAnswerCache
    from memory_core.retrospect.factory import build_llm

    llm = build_llm(settings)
    return llm_judge(llm=llm, cache=SQLAnswerCache(engine_for(settings))) if llm else None


def consolidate_run(
    namespace: str, dry_run: bool, settings: Settings, log: Log = _log
) -> ConsolidateSummary:
    """Plan, check and apply the merges of one namespace in one transaction."""
    from memory_core.consolidate.stage import consolidate

    judge = _judge(settings)
    embedder = embedder_for(settings)
    report = consolidate(
        engine=engine_for(settings),
        namespace=namespace,
        rules=settings.consolidate,
        embedder=embedder,
        judge=judge,
        dry_run=dry_run,
    )
    synced = _sync_index(namespace, settings, embedder, log) if embedder and not dry_run else ""
    log.info(
        "%s: %d cards, %d merges absorbing %d, %d facts superseded (%s)",
        namespace,
        report.cards_seen,
        report.merges,
        report.absorbed,
        report.facts_superseded,
        report.similarity,
    )
    return ConsolidateSummary(
        namespaces=1,
        cards_seen=report.cards_seen,
        merges=report.merges,
        absorbed=report.absorbed,
        superseded=report.superseded,
        judged=report.judged,
        unjudged=report.unjudged,
        facts_superseded=report.facts_superseded,
        embedded=report.embedded,
        similarity=report.similarity,
        index=synced,
        dry_run=dry_run,
        plan=report.plan,
    )


def _sync_index(namespace: str, settings: Settings, embedder: Embedder, log: Log) -> str:
    """The index is derived data: after the merges, it holds exactly the served cards."""
    from memory_core.errors import IndexUnavailable
    from memory_core.index.factory import open_index
    from memory_core.index.sync import rebuild_index, stored_models

    engine = engine_for(settings)
    dim = embedder.dim or stored_models(engine=engine).get(embedder.model, 0)
    if not dim:
        return f"{namespace}: nothing to index yet"
    try:
        index = open_index(settings, dim=dim)
    except IndexUnavailable as exc:  # e.g. the API holds the embedded index: said, not hidden
        log.warning("vector index not synced: %s", exc)
        return f"{namespace}: not synced ({exc}); run `hindsight index rebuild`"
    try:
        done = rebuild_index(engine=engine, index=index, model=embedder.model, namespace=namespace)
    finally:
        index.close()
    return f"{namespace}: {done.upserted} points, {done.deleted} removed"
