"""The retrospect flow: batches of pending trajectories until none is left (or the budget is)."""

from __future__ import annotations

import uuid
from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.futures import wait

from flows.naming import run_name, thread_runner
from flows.params import RetrospectParams
from flows.redacted import for_ui
from flows.stages import count_dead_letters, final_state, redrive_if_retry, stage
from flows.summary import RunOutcome
from memory_core.errors import LLMTransient
from memory_core.heartbeat import Heartbeat, Liveness
from memory_core.models.drafts import Extraction
from memory_core.retrospect.claims import worker_id
from memory_core.retrospect.summary import RetrospectSummary
from memory_core.settings import Settings
from tasks.llm import ClaimRef, claim_refs, ensure_llm_limit, finish_refs, llm_extract
from tasks.retrospect import retrospect_batch
from tasks.runtime import engine_for


def run_retrospect(params: RetrospectParams, settings: Settings) -> RetrospectSummary:
    """Rule extraction in batches, or LLM extraction when an LLM is configured."""
    if settings.llm.base_url:
        return _run_llm(params, settings)
    summary = RetrospectSummary()
    worker = worker_id()
    while params.max_batches is None or summary.batches < params.max_batches:
        batch = retrospect_batch(summary.batches + 1, params.namespace, worker, settings)
        if batch.claimed == 0:
            break
        summary.add(batch)
    return summary


def _failure(state: State, settings: Settings, summary: RetrospectSummary) -> str:
    """Why a run's LLM part failed (counted in the summary's failed calls, by reason)."""
    exc = state.result(raise_on_failure=False)
    if not isinstance(exc, BaseException):
        summary.failed_call(f"task ended {state.name}", 1)
        return f"task ended {state.name}: {state.message}"
    n = len(settings.llm.retry_delays_s) + 1 if isinstance(exc, LLMTransient) else 1
    summary.failed_call(f"{type(exc).__name__}: {for_ui(str(exc).splitlines()[0])[:80]}", n)
    tries = f"after {n} tries" if n > 1 else "not retried"
    # the run's rule lesson is stored already: only its LLM part waits for a re-drive
    return f"LLM part: {type(exc).__name__}: {exc} ({tries})"


def _within_budget(
    refs: list[ClaimRef], spent: int, settings: Settings
) -> tuple[list[ClaimRef], list[uuid.UUID]]:
    """The claimed runs the token budget still covers, and the ones that must wait."""
    if settings.llm.token_budget is None:
        return refs, []
    chosen, deferred, reserved = [], [], 0
    for ref in refs:
        if spent + reserved + ref.estimate > settings.llm.token_budget:
            deferred.append(ref.id)
        else:
            chosen.append(ref)
            reserved += ref.estimate
    return chosen, deferred


def _run_llm(params: RetrospectParams, settings: Settings) -> RetrospectSummary:
    """One llm-extract task per trajectory, in parallel; a batch finishes in one transaction."""
    ensure_llm_limit(settings)
    summary, worker = RetrospectSummary(), worker_id()
    # the claims live as long as this loop beats for them: the LLM calls of a batch may take
    # longer than the silence that frees a dead worker's runs
    every = Liveness.of(settings.retrospect).every
    with Heartbeat(engine=engine_for(settings), worker=worker, every=every):
        _llm_batches(params, settings, summary, worker)
    return summary


def _llm_batches(
    params: RetrospectParams, settings: Settings, summary: RetrospectSummary, worker: str
) -> None:
    extract = llm_extract.with_options(
        retries=len(settings.llm.retry_delays_s), retry_delay_seconds=settings.llm.retry_delays_s
    )
    spent = 0
    while params.max_batches is None or summary.batches < params.max_batches:
        n = summary.batches + 1
        claimed = claim_refs(n, params.namespace, worker, settings)
        refs = claimed.refs
        if not refs:
            break
        # the rule lessons are already stored; what is left is the LLM part of each run
        usable = [ref for ref in refs if ref.id not in claimed.failed]
        chosen, deferred = _within_budget(usable, spent, settings)
        futures = {ref.id: extract.submit(ref.id, ref.key, settings) for ref in chosen}
        wait(list(futures.values()))
        extractions: dict[uuid.UUID, Extraction] = {}
        failed: dict[uuid.UUID, str] = dict(claimed.failed)
        for rid, future in futures.items():
            if future.state.is_completed():
                extractions[rid] = future.result()
            else:
                failed[rid] = _failure(future.state, settings, summary)
        batch = finish_refs(n, refs, worker, extractions, failed, deferred, settings)
        batch.cards_created += claimed.rule_cards
        batch.evidence_added += claimed.rule_evidence
        batch.drafts_rejected += claimed.rule_refused
        summary.add(batch)
        spent += batch.tokens_sent + batch.tokens_received
        if deferred:
            summary.budget_exhausted = True
            print(
                f"token budget of {settings.llm.token_budget} spent: {len(deferred)} "
                "trajectories wait for the next run"
            )
            break


class RetrospectRun(RetrospectSummary):
    """A retrospect flow run: the counts, and what failed or came back on a retry."""

    outcome: RunOutcome = RunOutcome()


@flow(
    name="retrospect",
    flow_run_name=run_name("retrospect"),
    log_prints=True,
    task_runner=thread_runner(),
)
def retrospect(params: RetrospectParams = RetrospectParams()) -> State[Any]:
    """Distil cards from every pending trajectory (rules; with an LLM configured, the LLM too).
    Failed when a run was dead-lettered; retrying the flow run re-drives those."""
    settings, out = Settings(), RunOutcome()
    stage("redrive", lambda: redrive_if_retry(settings, out), None, out)
    done = stage("retrospect", lambda: run_retrospect(params, settings), RetrospectSummary(), out)
    stage("dead letters", lambda: count_dead_letters(settings, out), None, out)
    return final_state(out, RetrospectRun(**done.model_dump(), outcome=out))
