"""The stage bodies the Prefect tasks run, without Prefect: the same call, log and summary.

The tasks wrap these (adding retries, names and the run logger); the CLI calls them directly
when no Prefect API is configured, so a stage command on a small store answers at once
instead of starting a temporary Prefect server. Nothing here imports Prefect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tasks.runtime import engine_for

if TYPE_CHECKING:  # each stage imports its own code when it runs: `validate` never loads decay
    from memory_core.decay import DecayParams, DecayReport
    from memory_core.retrospect.summary import BatchResult
    from memory_core.settings import Settings
    from memory_core.validate.summary import ValidationSummary

Log = logging.Logger | logging.LoggerAdapter[Any]
Progress = Callable[[str, int, int], None]  # (what is happening, steps done, steps in all)
_log = logging.getLogger("hindsight.stages")


def validate_run(
    namespace: str | None,
    settings: Settings,
    log: Log = _log,
    *,
    on_progress: Progress | None = None,
    run_id: str | None = None,
) -> ValidationSummary:
    """Drafts -> active / review / rejected; the report and Data Docs under the data dir;
    refused regenerations are kept as rejections of the flow run `run_id`."""
    from memory_core.validate.stage import validate_drafts

    report = validate_drafts(
        regenerate=_regenerator(settings),
        engine=engine_for(settings),
        reports_dir=settings.reports_dir,
        namespace=namespace,
        registry=settings.review.registry,
        review_below=settings.review.below,
        on_progress=on_progress,
        run_id=run_id,
    )
    log.info(
        "validated %d drafts: %d active, %d to review, %d rejected",
        report.evaluated,
        report.activated,
        report.review,
        report.rejected,
    )
    if report.deferred:
        log.warning("%d failing LLM drafts wait for the LLM to regenerate them", report.deferred)
    for rule, n in report.rule_failures.items():
        log.warning("%d card(s) failed %r", n, rule)
    return report


def _regenerator(settings: Settings) -> Any:
    """With an LLM configured, a rejected LLM draft gets one regeneration attempt."""
    if not settings.llm.base_url:  # the openai package is only imported when it is used
        return None
    from memory_core.retrospect.factory import build_llm
    from memory_core.validate.regenerate import llm_regenerator

    llm = build_llm(settings)
    return llm_regenerator(llm) if llm is not None else None


def decay_run(
    params: DecayParams,
    namespace: str | None,
    settings: Settings,
    log: Log = _log,
    *,
    on_progress: Progress | None = None,
) -> DecayReport:
    """Plan the rules, then (unless a dry run) apply them in one transaction."""
    from memory_core.decay import run_decay

    report = run_decay(
        engine=engine_for(settings),
        params=params,
        weights=settings.ranking,
        namespace=namespace,
        on_progress=on_progress,
    )
    log.info(
        "%s: %d cards faded, %d archived as unused, %d archived over the cap, "
        "%d measured harmful (to review), %d faded for no measured effect, "
        "%d changed meanwhile (left for the next run)",
        "dry run" if params.dry_run else "decay",
        report.counts["decay"],
        report.counts["unused"],
        report.counts["cap"],
        report.counts["harms"],
        report.counts["fade"],
        report.skipped,
    )
    return report


def retrospect_rule_batch(
    namespace: str | None,
    worker: str,
    settings: Settings,
    log: Log = _log,
    run_id: str | None = None,
) -> BatchResult:
    """Claim up to batch_size trajectories, write their cards, and mark them done together."""
    from memory_core.heartbeat import Liveness
    from memory_core.retrospect.rule_extractor import RuleExtractor
    from memory_core.retrospect.stage import retrospect_once

    result = retrospect_once(
        engine=engine_for(settings),
        extractor=RuleExtractor(default_task_type=settings.default_task_type),
        worker=worker,
        batch_size=settings.retrospect.batch_size,
        lease=timedelta(seconds=settings.retrospect.lease_seconds),
        namespace=namespace,
        run_id=run_id,
        screen=settings.screen,
        liveness=Liveness.of(settings.retrospect),
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
    return result


def retention_run(namespace: str, settings: Settings, log: Log = _log) -> dict[str, int]:
    """Remove what the namespace's retention policy no longer keeps; what went, by kind."""
    from memory_core.retention.apply import apply_retention
    from memory_core.retention.stage import removed_text

    engine = engine_for(settings)
    removed = apply_retention(engine=engine, rules=settings.decay, namespace=namespace)
    if removed:
        log.info("retention %s: %s", namespace, removed_text(removed))
    return removed
