"""Apply a namespace's retention: its raw runs older than the policy's days are removed (those
a card's evidence cites stay as summaries: id, key, task, task group, outcome, times), with
every copy of their text (the LLM answers about them, the evidence's copied values, the
backtest's listed calls); its uses and logged queries older than their days go too.

Safe to re-run after a kill at any point: each batch of runs is one transaction (its answers,
evidence, backtest entries and the runs themselves together), a summary is never selected
again, and a second run over the same days removes nothing. On SQLite the freed pages are
zeroed and the write-ahead log truncated at the end (memory_core.erase)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, CursorResult, Engine, Text, bindparam, delete, select, update
from sqlalchemy import cast as sql_cast

from memory_core.consolidate.judge import PROMPT_ID as CARDS_PROMPT
from memory_core.erase import flush_log, zero_freed
from memory_core.models.backtest import CardBacktest
from memory_core.models.card import CardEvidence
from memory_core.models.columns import utcnow
from memory_core.models.llm_answer import LLMAnswer
from memory_core.models.trace_span import TraceSpan
from memory_core.models.trajectory import Trajectory, TrajectoryStatus
from memory_core.namespaces.lines import SUMMARY_CLEARED
from memory_core.retention.evidence import summary_of, summary_result
from memory_core.retention.policy import policy_of, record_run
from memory_core.settings import DecayRules

BATCH = 500
RUNS, EVIDENCE = Trajectory.__table__, CardEvidence.__table__  # type: ignore[attr-defined]
ANSWERS, BACKTESTS = LLMAnswer.__table__, CardBacktest.__table__  # type: ignore[attr-defined]
SPANS = TraceSpan.__table__  # type: ignore[attr-defined]
# what a run cited by evidence keeps: the export's summary form, nothing of its text
SUMMARY: dict[str, Any] = {
    **SUMMARY_CLEARED,
    "lease_heartbeat": None,
    "dead_letter_run": None,
    "extra": {"summary": True},
    "status": TrajectoryStatus.done.value,
}


def _count(result: Any) -> int:
    return int(cast(CursorResult[Any], result).rowcount or 0)


def _old_runs(engine: Engine, namespace: str, cutoff: datetime, limit: int) -> list[uuid.UUID]:
    """The next runs past the cutoff not yet removed (a worker's claimed run waits its turn)."""
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(RUNS.c.id)
                .where(
                    RUNS.c.namespace == namespace,
                    RUNS.c.created_at < cutoff,
                    RUNS.c.status != TrajectoryStatus.processing.value,
                    RUNS.c.extra["summary"].as_string().is_(None),
                )
                .order_by(RUNS.c.id)
                .limit(limit)
            ).scalars()
        )


def _summarize_evidence(conn: Connection, cited: set[uuid.UUID]) -> int:
    rows = conn.execute(
        select(EVIDENCE.c.id, EVIDENCE.c.condition, EVIDENCE.c.action, EVIDENCE.c.result).where(
            EVIDENCE.c.trajectory_id.in_(cited)
        )
    ).all()
    if rows:
        conn.execute(
            update(EVIDENCE)
            .where(EVIDENCE.c.id == bindparam("row_id"))
            .values(condition=bindparam("c"), action=bindparam("a"), result=bindparam("r")),
            [
                {
                    "row_id": r.id,
                    "c": summary_of(r.condition or {}),
                    "a": summary_of(r.action or {}),
                    "r": summary_result(r.result or {}),
                }
                for r in rows
            ],
        )
    return len(rows)


def _drop_backtest_entries(conn: Connection, namespace: str, ids: list[uuid.UUID]) -> int:
    """The backtest's listed warnings that name these runs (the figures stay)."""
    gone = {str(i) for i in ids}
    dropped, changed = 0, []
    for card_id, runs in conn.execute(
        select(BACKTESTS.c.card_id, BACKTESTS.c.runs).where(
            BACKTESTS.c.namespace == namespace, sql_cast(BACKTESTS.c.runs, Text) != "[]"
        )
    ):
        kept = [r for r in runs or [] if str(r.get("trajectory_id")) not in gone]
        if len(kept) != len(runs or []):
            dropped += len(runs) - len(kept)
            changed.append({"cid": card_id, "kept": kept})
    if changed:
        conn.execute(
            update(BACKTESTS)
            .where(BACKTESTS.c.card_id == bindparam("cid"))
            .values(runs=bindparam("kept")),
            changed,
        )
    return dropped


def _batch(
    conn: Connection, namespace: str, ids: list[uuid.UUID], out: Counter[str], first: bool
) -> None:
    """One batch of old runs, in the caller's transaction."""
    cited = set(
        conn.execute(
            select(EVIDENCE.c.trajectory_id).where(EVIDENCE.c.trajectory_id.in_(ids)).distinct()
        ).scalars()
    )
    about = delete(ANSWERS).where(ANSWERS.c.trajectory_id.in_(ids))
    out["llm_answers"] += _count(conn.execute(about))
    if first:  # answers about groups of runs name none of them: all go (a cache, re-asked)
        out["llm_answers"] += _count(
            conn.execute(
                delete(ANSWERS).where(
                    ANSWERS.c.trajectory_id.is_(None),
                    ANSWERS.c.namespace == namespace,
                    ANSWERS.c.prompt_id != CARDS_PROMPT,
                )
            )
        )
    out["evidence"] += _summarize_evidence(conn, cited)
    out["backtest_runs"] += _drop_backtest_entries(conn, namespace, ids)
    if cited:
        out["summarized"] += _count(
            conn.execute(update(RUNS).where(RUNS.c.id.in_(cited)).values(**SUMMARY))
        )
    gone = [i for i in ids if i not in cited]
    if gone:
        out["trajectories"] += _count(conn.execute(delete(RUNS).where(RUNS.c.id.in_(gone))))


def apply_retention(
    *,
    engine: Engine,
    rules: DecayRules,
    namespace: str,
    now: datetime | None = None,
    batch: int = BATCH,
    on_batch: Callable[[Counter[str]], None] | None = None,
) -> dict[str, int]:
    """Remove what the namespace's policy no longer keeps; what was removed, by kind (recorded
    as the namespace's last retention run)."""
    from memory_core.decay.use_log import prune_logs

    policy, now = policy_of(engine, rules, namespace), now or utcnow()
    out: Counter[str] = Counter()
    if policy.trajectories_days > 0:
        cutoff, first = now - timedelta(days=policy.trajectories_days), True
        while ids := _old_runs(engine, namespace, cutoff, batch):
            with engine.begin() as conn:
                zero_freed(conn)
                _batch(conn, namespace, ids, out, first)
            first = False
            if on_batch is not None:
                on_batch(out)
        with engine.begin() as conn:  # spans waiting for a root that never came
            zero_freed(conn)
            waiting = delete(SPANS).where(SPANS.c.namespace == namespace)
            waiting = waiting.where(SPANS.c.received_at < cutoff)
            out["trace_spans"] += _count(conn.execute(waiting))
    if policy.uses_days > 0:
        out["uses"], out["queries"] = prune_logs(
            engine=engine, retention_days=policy.uses_days, namespace=namespace, now=now
        )
    removed = {k: n for k, n in sorted(out.items()) if n}
    record_run(engine, namespace, removed, now)
    flush_log(engine)
    return removed
