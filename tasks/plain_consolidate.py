"""The consolidation stage body without Prefect: the task wraps it; the CLI calls it directly."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pydantic import BaseModel

from memory_core.embed.base import Embedder
from memory_core.settings import Settings
from tasks.plain import Log, Progress
from tasks.runtime import PerSettings, engine_for

_log = logging.getLogger("hindsight.stages")


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
    deferred: int = 0  # changes whose cards others changed meanwhile: planned again next run
    deferred_ids: list[uuid.UUID] = []  # each by its survivor card (capped per namespace)
    embedded: int = 0
    similarity: str = ""
    index: str = ""  # how the vector index was brought in line (or why it was not)
    dry_run: bool = False
    plan: list[dict[str, Any]] = []
    failures: list[str] = []  # namespaces whose task failed (the others went on)

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
            "deferred",
            "embedded",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.similarity = other.similarity or self.similarity
        self.index = "; ".join(x for x in (self.index, other.index) if x)
        self.deferred_ids += other.deferred_ids
        self.plan += other.plan
        self.failures += other.failures


def _build_embedder(settings: Settings) -> Embedder | None:
    from memory_core.embed.factory import build_embedder

    return build_embedder(settings)


# one model per process: loading it takes a while
_embedder = PerSettings(_build_embedder, maxsize=2)


def embedder_for(settings: Settings) -> Embedder | None:
    """The process's embedder for these settings (None: signature and word overlap only)."""
    return _embedder(settings)


def _judge(settings: Settings) -> Any:
    """With an LLM configured, it judges pairs alike but not clearly the same lesson."""
    if not settings.llm_base_url:  # the openai package is only imported when it is used
        return None
    from memory_core.consolidate.judge import grounded_judge, llm_judge
    from memory_core.llm.cache import SQLAnswerCache
    from memory_core.retrospect.factory import build_llm

    llm = build_llm(settings)
    if llm is None:
        return None
    engine = engine_for(settings)
    return grounded_judge(judge=llm_judge(llm=llm, cache=SQLAnswerCache(engine)), engine=engine)


def consolidate_run(
    namespace: str,
    dry_run: bool,
    settings: Settings,
    log: Log = _log,
    *,
    on_progress: Progress | None = None,
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
        on_progress=on_progress,
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
    if report.deferred:
        log.info(
            "%s: %d merges / supersessions whose cards changed meanwhile wait for the next run",
            namespace,
            report.deferred,
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
        deferred=report.deferred,
        deferred_ids=report.deferred_ids,
        embedded=report.embedded,
        similarity=report.similarity,
        index=synced,
        dry_run=dry_run,
        plan=report.plan,
    )


def _sync_index(namespace: str, settings: Settings, embedder: Embedder, log: Log) -> str:
    """The index is derived data: after the merges, it holds exactly the served cards."""
    from memory_core.errors import IndexUnavailable, InvalidInput
    from memory_core.index.factory import open_index
    from memory_core.index.sync import index_model, rebuild_index

    engine = engine_for(settings)
    try:  # the same choice of model and dimension as `hindsight index rebuild`
        _, dim = index_model(engine=engine, embedder=embedder)
    except InvalidInput:
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
