"""Prefect tasks of LLM retrospection: one task per trajectory, retried on transient errors only."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from functools import lru_cache
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import State
from prefect.concurrency.sync import concurrency
from prefect.runtime import flow_run, task_run
from pydantic import BaseModel
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from memory_core.errors import LLMTransient, NotFound
from memory_core.heartbeat import Liveness
from memory_core.models.drafts import Extraction, Extractor, view_of
from memory_core.models.trajectory import Trajectory
from memory_core.redact import redact
from memory_core.retrospect.claims import claim_batch
from memory_core.retrospect.factory import build_llm_extractor, build_rule_extractor
from memory_core.retrospect.llm_extractor import vocabulary_text
from memory_core.retrospect.prefilter import FilterLimits, estimate_tokens, render
from memory_core.retrospect.prompts import load_prompt
from memory_core.retrospect.rules_first import write_rule_lessons
from memory_core.retrospect.siblings import contrast_holders
from memory_core.retrospect.stage import finish_batch
from memory_core.retrospect.summary import BatchResult
from memory_core.settings import Settings
from tasks.runtime import PerSettings, engine_for

LLM_LIMIT = "hindsight-llm"  # the global concurrency limit on LLM calls


class ClaimRef(BaseModel):
    """A claimed trajectory and the tokens it is expected to cost."""

    id: uuid.UUID
    namespace: str
    key: str
    estimate: int
    likely_calls: int = 2  # 1 when nothing went wrong: the decision points will likely be none


def ensure_llm_limit(settings: Settings) -> None:
    """Create or resize the Prefect global concurrency limit on LLM calls (when it is used)."""
    if not settings.llm.prefect_limit:
        return
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(LLM_LIMIT, settings.llm.concurrency)


@lru_cache(maxsize=4)
def _local_slots(n: int) -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(n)


def _gate(settings: Settings) -> Callable[[], AbstractContextManager[Any]]:
    """A call holds one of this process's slots, and with llm.prefect_limit one of the
    Prefect global limit shared by all workers (measured: ~0.4 s more per contended call)."""
    slots = _local_slots(settings.llm.concurrency)

    @contextmanager
    def gate() -> Iterator[None]:
        with slots:
            if settings.llm.prefect_limit:
                with concurrency(LLM_LIMIT, occupy=1, strict=False):
                    yield
            else:
                yield

    return gate


def _build_extractor(settings: Settings) -> Extractor:
    built = build_llm_extractor(settings, engine_for(settings), gate=_gate(settings))
    if built is None:
        raise ValueError("LLM extraction needs HINDSIGHT_LLM__BASE_URL")
    return built


_extractor = PerSettings(_build_extractor)


def extractor_for(settings: Settings) -> Extractor:
    """One LLM extractor (and client) per process and settings; the rules ran at claim time."""
    return _extractor(settings)


class ClaimedBatch(BaseModel):
    """A claimed batch: its runs, and the rule lessons written for them at once."""

    refs: list[ClaimRef] = []
    rule_cards: int = 0
    rule_evidence: int = 0
    rule_refused: int = 0  # rule drafts the trust screen refused (rejections)
    failed: dict[uuid.UUID, str] = {}  # runs the rule extractor choked on (no LLM for them)


CONTRAST_ANSWER_TOKENS = 600  # a few cards with reasons


def _estimate(row: Trajectory, settings: Settings, holds: tuple[int, int] | None = None) -> int:
    """Prompt and answer tokens of the run's LLM part: its two prompts and, when it holds its
    task group's contrast (`holds`: the group's successful and failed runs), that prompt."""
    limits = FilterLimits(
        max_observation_chars=settings.llm.max_observation_chars,
        max_system_chars=settings.llm.max_system_chars,
    )
    run = estimate_tokens(render(view_of(row).steps, header="", limits=limits).text)
    system = sum(estimate_tokens(load_prompt(n).text) for n in ("decision_points", "cards"))
    tokens = 2 * run + system + 2 * 300  # two prompts, two short answers
    if holds is not None and settings.llm.contrast:
        # the group's trials are runs of the same task: about as long as this one each
        n = sum(min(side, settings.llm.contrast_trials) for side in holds)
        trials = min(n * run, settings.llm.contrast_max_tokens)
        prompt = estimate_tokens(load_prompt("contrast").text + vocabulary_text())
        tokens += trials + prompt + CONTRAST_ANSWER_TOKENS
    return tokens


def _likely_calls(row: Trajectory, *, holds: bool = False) -> int:
    failed = row.outcome == "failure" or any(s.get("error") for s in row.steps)
    return (2 if failed else 1) + int(holds)


def _claim_name() -> str:
    return f"claim batch {task_run.parameters['batch_no']}"


@task(name="claim-batch", task_run_name=_claim_name, cache_policy=NO_CACHE)
def claim_refs(
    batch_no: int, namespace: str | None, worker: str, settings: Settings
) -> ClaimedBatch:
    """Lease a batch of pending trajectories, write their rule lessons at once (they never wait
    on the LLM), and estimate what each LLM extraction will cost."""
    engine = engine_for(settings)
    rows = claim_batch(
        engine=engine,
        worker=worker,
        batch_size=settings.retrospect.batch_size,
        lease=timedelta(seconds=settings.retrospect.lease_seconds),
        namespace=namespace,
        liveness=Liveness.of(settings.retrospect),
    )
    rules = build_rule_extractor(settings)
    done = (
        write_rule_lessons(
            engine=engine,
            rows=rows,
            extractor=rules,
            worker=worker,
            screen=settings.screen,
            run_id=str(flow_run.id) if flow_run.id else None,
        )
        if rules is not None and rows
        else None
    )
    failed = done.failed if done else {}
    if done and done.written:
        get_run_logger().info(
            "rule lessons of %d runs written first: %d new cards", done.written, done.cards_created
        )
    holders = contrast_holders(engine=engine, rows=rows) if settings.llm.contrast else {}
    refs = [
        ClaimRef(
            id=r.id,
            namespace=r.namespace,
            key=r.key,
            estimate=_estimate(r, settings, holders.get(r.id)),
            likely_calls=_likely_calls(r, holds=settings.llm.contrast and r.id in holders),
        )
        for r in rows
    ]
    # longest first, so the two-call runs do not all queue up at the end of the batch
    return ClaimedBatch(
        refs=sorted(refs, key=lambda ref: (-ref.likely_calls, -ref.estimate)),
        rule_cards=done.cards_created if done else 0,
        rule_evidence=done.evidence_added if done else 0,
        rule_refused=done.refused if done else 0,
        failed=failed,
    )


def transient_only(_task: object, _run: object, state: State) -> bool:
    """Retry timeouts, 429, 5xx and connection errors; never 4xx or invalid answers."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, LLMTransient) or _database_unreachable(error)


def _database_unreachable(error: object) -> bool:
    """A connection the database refused or dropped (server full, restarting): a retry can
    succeed. SQLite's operational errors (a missing table) are not connection errors."""
    if not isinstance(error, OperationalError):
        return False
    if error.connection_invalidated:
        return True
    try:
        import psycopg
    except ImportError:  # psycopg is a dependency; without it no PostgreSQL URL connects
        return False
    return isinstance(error.orig, psycopg.OperationalError)


def _extract_name() -> str:
    # the task run's name is on the flow run's page: a key may hold what the agent named it by
    return f"llm-extract {redact(task_run.parameters['key'])[:60]}"


@task(
    name="llm-extract",
    task_run_name=_extract_name,
    cache_policy=NO_CACHE,
    retries=3,
    retry_delay_seconds=[2, 8, 30],
    retry_condition_fn=transient_only,
)
def llm_extract(trajectory_id: uuid.UUID, key: str, settings: Settings) -> Extraction:
    """Extract cards from one trajectory; answers are cached, so a retry pays only for new ones."""
    with Session(engine_for(settings)) as session:
        row = session.get(Trajectory, trajectory_id)
        if row is None:
            raise NotFound(f"trajectory {trajectory_id} ({redact(key)}) is gone")
        view = view_of(row)
    x = extractor_for(settings).extract(view)
    get_run_logger().info(
        "%s: %d drafts, %d calls, %d cached, %d tokens sent, %d saved",
        key,
        len(x.drafts),
        x.calls,
        x.cached,
        x.tokens_sent,
        x.tokens_saved,
    )
    if x.rejected:  # wrong by content: kept on the run when its batch finishes, never parked
        get_run_logger().warning("%s: LLM answer rejected for its content: %s", key, x.rejected[0])
    return x


def _finish_name() -> str:
    return f"finish batch {task_run.parameters['batch_no']}"


@task(name="finish-batch", task_run_name=_finish_name, cache_policy=NO_CACHE)
def finish_refs(
    batch_no: int,
    refs: list[ClaimRef],
    worker: str,
    extractions: dict[uuid.UUID, Extraction],
    failed: dict[uuid.UUID, str],
    deferred: list[uuid.UUID],
    settings: Settings,
) -> BatchResult:
    """Write the batch's LLM cards; mark runs done, dead-letter, or pending again (budget).
    A dead letter remembers this flow run: retrying the run re-drives it."""
    logger = get_run_logger()
    for rid, why in failed.items():
        logger.error("dead letter %s: %s", rid, why)
    if deferred:
        logger.warning("token budget spent: %d trajectories wait for the next run", len(deferred))
    result = finish_batch(
        engine=engine_for(settings),
        rows=refs,
        worker=worker,
        extractions=extractions,
        failed=failed,
        deferred=deferred,
        run_id=str(flow_run.id) if flow_run.id else None,
        screen=settings.screen,
    )
    return result
