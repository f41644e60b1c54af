"""The consolidation stage body without Prefect: the task wraps it; the CLI calls it directly."""

from __future__ import annotations

import logging
from typing import Any

from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.embed.base import Embedder
from memory_core.settings import Settings
from tasks.plain import Log, Progress
from tasks.runtime import PerSettings, engine_for

_log = logging.getLogger("hindsight.stages")


def _build_embedder(settings: Settings) -> Embedder | None:
    from memory_core.embed.factory import build_embedder

    return build_embedder(settings)


# one model per process: loading it takes a while
_embedder = PerSettings(_build_embedder, maxsize=2)


def embedder_for(settings: Settings) -> Embedder | None:
    """The process's embedder for these settings (None: signature and word overlap only)."""
    return _embedder(settings)


def _judge(settings: Settings, namespace: str) -> Any:
    """With an LLM configured, it judges pairs alike but not clearly the same lesson."""
    if not settings.llm.base_url:  # the openai package is only imported when it is used
        return None
    from memory_core.consolidate.judge import grounded_judge, llm_judge
    from memory_core.llm.cache import SQLAnswerCache
    from memory_core.retrospect.factory import build_llm

    llm = build_llm(settings)
    if llm is None:
        return None
    engine = engine_for(settings)
    return grounded_judge(
        judge=llm_judge(llm=llm, cache=SQLAnswerCache(engine), namespace=namespace), engine=engine
    )


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

    judge = _judge(settings, namespace)
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
    synced = sync_index(namespace, settings, embedder, log) if embedder and not dry_run else ""
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
    report.index = synced
    return report


def sync_index(namespace: str | None, settings: Settings, embedder: Embedder, log: Log) -> str:
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
