"""The facts stage: trajectories not yet fact-extracted -> rule facts (+ LLM facts) -> write_fact.

Statements are written in time order (the turn's own time, else the session date, else the
trajectory's arrival), so write_fact's "the newest statement supersedes" is right; a statement
older than the one already holding a key+query (a late-arriving old conversation) is skipped
instead of superseding it. Done trajectories get a marker in `trajectory.extra` (set in one
statement per batch), so a second run finds nothing to do.

When a run's LLM part fails (an outage still there after the retries, a refusal, an answer
still invalid after the repair prompt), its rule facts are written and the run is parked as
a dead letter (`extra["facts_dead_letter"]`, with the flow run that parked it): it is listed
by `hindsight dead-letters list`, and waits for a re-drive (or a Retry of that flow run)
instead of being marked done or asked again every night.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.errors import (
    InvalidInput,
    LLMAnswerRejected,
    LLMOutputInvalid,
    LLMRefused,
    LLMTransient,
)
from memory_core.facts.corroborate import ToolResult, corroboration, subject_results
from memory_core.facts.extract import RULES_VERSION, is_person, rule_facts
from memory_core.facts.llm import LLMFactExtractor, LLMResult
from memory_core.facts.marks import mark, park, pending, reject
from memory_core.facts.rules import Statement
from memory_core.facts.store import FactIn, normalise_key, write_fact
from memory_core.facts.subject import is_generic, run_person
from memory_core.models.card import Card, CardKind, CardStatus, FactStanding
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Step, Trajectory
from memory_core.redact import redact
from memory_core.screen.pointers import known_identifiers
from memory_core.screen.provenance import Origin

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class FactsReport(BaseModel):
    """What one run of the facts stage did (also the Prefect task's result)."""

    trajectories: int = 0
    statements: int = 0
    found: int = 0
    new: int = 0
    refreshed: int = 0
    superseded: int = 0
    skipped_older: int = 0
    refused: int = 0
    corroborated: int = 0  # statements a tool result about their subject agreed with
    llm_calls: int = 0
    llm_cached: int = 0
    llm_invalid: int = 0
    # "key: error" of the runs whose LLM part failed (outage, refusal, invalid answer): their
    # rule facts are written, the run is parked as a dead letter until it is re-driven
    llm_failed: list[str] = []
    # "key: reason" of the runs whose LLM answer was well-formed but wrong by content (a fact
    # citing a turn it was not shown): rejected, kept with the raw answer, never parked
    llm_rejected: list[str] = []
    errors: list[str] = []


def statements_of(row: Trajectory) -> list[Statement]:
    """The messages people wrote in a stored trajectory, with their source and subject."""
    said = [
        (step, str(step.get("speaker") or step.get("role")), redact(str(step["text"])))
        for step in row.steps
        if step.get("type") == "message"
        and step.get("text")
        and is_person(step.get("role"), step.get("speaker"))
    ]  # facts are derived from redacted text only
    person, named = run_person(
        key=row.key,
        extra=row.extra,
        steps=row.steps,
        said=[text for _, who, text in said if is_generic(who)],
    )
    out = []
    for step, who, text in said:
        ts = step.get("ts")
        generic = is_generic(who)
        source = {
            "trajectory_id": str(row.id),
            "trajectory_key": redact(row.key),  # served with the fact: a key may hold a secret
            "step": step.get("index"),
            **({"turn_id": step["turn_id"]} if step.get("turn_id") else {}),
            "speaker": who,
        }
        out.append(
            Statement(
                speaker=who,
                text=text,
                said_at=datetime.fromisoformat(ts) if isinstance(ts, str) else None,
                source=source,
                subject=person if generic else who,
                anonymous=generic and not named,
            )
        )
    return out


def _holder(engine: Engine, namespace: str, fact: FactIn) -> list[Card]:
    q = select(Card).where(
        col(Card.namespace) == namespace,
        col(Card.kind) == CardKind.fact.value,
        col(Card.key) == normalise_key(fact.key),
        col(Card.status) == CardStatus.active.value,
    )
    q = q.where(col(Card.query).is_(None) if fact.query is None else col(Card.query) == fact.query)
    with Session(engine) as session:
        return list(session.execute(q).scalars())


def _said_at(card: Card) -> str | None:
    value = (card.provenance.get("source") or {}).get("said_at")
    return value if isinstance(value, str) else None


def _strong(card: Card) -> bool:
    return card.standing != FactStanding.claim.value


def _write(
    engine: Engine,
    namespace: str,
    fact: FactIn,
    actor: str,
    report: FactsReport,
    st: Statement,
    known: frozenset[str],
    screen: bool,
    results: Callable[[str], list[ToolResult]],
) -> None:
    subject = str(fact.source.get("subject") or st.about)
    # a role's words are the person's the run names; a named speaker speaks for themselves
    speaker = st.about if is_generic(st.speaker) else st.speaker
    found = corroboration(fact.value, results(subject))
    standing = FactStanding.corroborated if found else FactStanding.claim
    held = _holder(engine, namespace, fact)
    said = fact.source.get("said_at")
    if any(h.value == fact.value for h in held):
        report.refreshed += 1
    elif said and any(
        (_said_at(h) or "") > said and (_strong(h) or standing is FactStanding.claim) for h in held
    ):
        report.skipped_older += 1  # a newer statement already holds this key: keep it
        return
    else:
        report.new += 1
        report.superseded += sum(1 for h in held if found or not _strong(h))
    try:
        write_fact(
            engine=engine,
            namespace=namespace,
            fact=fact,
            actor=actor,
            origin=Origin.llm if actor == "facts-llm" else Origin.user,
            said=[st.text],
            known=known,
            screen=screen,
            standing=standing,
            speaker=speaker,
            subject=subject,
            corroboration=[{**found, "trajectory_id": (st.source or {}).get("trajectory_id")}]
            if found
            else [],
        )
    except InvalidInput as exc:  # e.g. a value that looks like a credential
        report.refused += 1
        report.errors.append(f"{fact.key}: {exc}")
        return
    if found:
        report.corroborated += 1


def _results_of(row: Trajectory, statements: list[Statement]) -> Callable[[str], list[ToolResult]]:
    """The run's tool results about a subject it names (none for an anonymous one)."""
    named = {st.about for st in statements if not st.anonymous}
    memo: dict[str, list[ToolResult]] = {}

    def about(subject: str) -> list[ToolResult]:
        if subject not in named:
            return []
        if subject not in memo:
            memo[subject] = subject_results(row.steps, subject)
        return memo[subject]

    return about


def _when(st: Statement, row: Trajectory) -> datetime:
    return st.said_at or row.created_at or _EPOCH


OUTAGE_RUNS = 3  # runs in a row failing transiently that mean the LLM is down for this run


def _with_retries(call: Callable[[], LLMResult], delays: Sequence[float]) -> LLMResult:
    """The call, retried after each delay while it fails transiently (answers are cached)."""
    for delay in delays:
        try:
            return call()
        except LLMTransient:
            time.sleep(delay)
    return call()


def extract_facts(
    *,
    engine: Engine,
    namespace: str | None = None,
    llm: LLMFactExtractor | None = None,
    batch_size: int = 100,
    max_batches: int | None = None,
    screen: bool = True,
    run_id: str | None = None,
    retry_delays_s: Sequence[float] = (),
) -> FactsReport:
    """Extract facts from every trajectory not yet done (of one namespace, or all).

    A transient LLM failure is retried after each of retry_delays_s; what still fails (and an
    invalid answer, after its repair prompt) parks the run's LLM part as a dead letter that
    remembers run_id (the flow run), so retrying that flow run re-drives it."""
    report = FactsReport()
    outage = 0  # runs in a row whose LLM part failed transiently after its retries
    version = RULES_VERSION + (f"+{llm.version}" if llm else "")
    batches = 0
    after: tuple[datetime, uuid.UUID] | None = None
    while max_batches is None or batches < max_batches:
        with Session(engine) as session:
            rows = pending(session, namespace, batch_size, after)
        if not rows:
            break
        batches += 1
        after = (rows[-1].created_at, rows[-1].id)
        parked: dict[uuid.UUID, str] = {}
        rejected: dict[uuid.UUID, tuple[str, str]] = {}
        found: list[tuple[datetime, int, int, str, FactIn, str, Statement]] = []
        known: dict[int, frozenset[str]] = {}  # by order: the identifiers each run knows
        results: dict[int, Callable[[str], list[ToolResult]]] = {}  # by order: about a subject
        for order, row in enumerate(rows):
            statements = statements_of(row)
            known[order] = known_identifiers([Step.model_validate(s) for s in row.steps])
            results[order] = _results_of(row, statements)
            report.statements += len(statements)
            for i, st in enumerate(statements):
                for fact in rule_facts(st):
                    found.append((_when(st, row), order, i, row.namespace, fact, "facts-rules", st))
            if llm is not None and statements and outage >= OUTAGE_RUNS:
                # the LLM is down: asking each remaining run again would cost every run its
                # timeouts and back-offs (hours for a big night); park them at once
                parked[row.id] = (
                    f"LLMTransient: not asked: the LLM failed {outage} runs in a row (outage)"
                )
                report.llm_failed.append(f"{row.key}: {parked[row.id]}")
                continue
            if llm is not None and statements:
                try:
                    result = _with_retries(
                        lambda row=row, statements=statements: llm.extract(  # type: ignore[misc]
                            trajectory_id=row.id, statements=statements
                        ),
                        retry_delays_s,
                    )
                except LLMAnswerRejected as exc:  # asking again gets the same: not parked
                    rejected[row.id] = (str(exc), exc.raw)
                    report.llm_invalid += 1
                    report.llm_rejected.append(f"{row.key}: {exc}")
                    outage = 0
                    continue
                except (LLMOutputInvalid, LLMTransient, LLMRefused) as exc:  # this run only
                    tries = (
                        f"after {len(retry_delays_s) + 1} tries"
                        if isinstance(exc, LLMTransient)
                        else "not retried"
                    )
                    parked[row.id] = f"{type(exc).__name__}: {exc} ({tries})"
                    outage = outage + 1 if isinstance(exc, LLMTransient) else 0
                    if isinstance(exc, LLMOutputInvalid):
                        report.llm_invalid += 1
                    report.llm_failed.append(f"{row.key}: {parked[row.id]}")
                    continue
                outage = 0
                report.llm_calls += result.calls
                report.llm_cached += result.cached
                for i, fact in result.facts:
                    when = _when(statements[i], row)
                    found.append((when, order, i, row.namespace, fact, "facts-llm", statements[i]))
        found.sort(key=lambda f: f[:3])
        report.found += len(found)
        for _, order, _, ns, fact, actor, st in found:
            _write(engine, ns, fact, actor, report, st, known[order], screen, results[order])
        report.trajectories += len(rows)
        if parked:
            park(engine, parked, run_id)
        if rejected:
            reject(engine, rejected, run_id, part="facts")
        done = [r.id for r in rows if r.id not in parked]
        if done:
            mark(engine, done, {"version": version, "at": utcnow().isoformat()})
    return report
