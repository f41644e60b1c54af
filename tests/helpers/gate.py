"""Runs, cards and evidence for the serving gate's tests, with times set by the test."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select
from sqlmodel import Session

from memory_core.models.backtest import CardBacktest
from memory_core.models.card import Card, CardEvidence, CardVersion
from memory_core.models.trajectory import Trajectory

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SIG = "seat map is locked"


def call(
    tool: str, error: str | None = None, **args: Any
) -> tuple[str, dict[str, Any], str | None]:
    """One tool call of a run: its tool, arguments and error."""
    return tool, args, error


def add_run(
    engine,
    *,
    key: str,
    group: str,
    at: datetime,
    calls: list[tuple[str, dict[str, Any], str | None]],
    outcome: str = "failure",
) -> uuid.UUID:
    """Store one run of a task group at a given time."""
    rid = uuid.uuid4()
    steps = [
        {"index": i, "type": "tool_call", "tool": t, "args": a, **({"error": e} if e else {})}
        for i, (t, a, e) in enumerate(calls)
    ]
    with Session(engine) as s:
        s.execute(
            insert(Trajectory),
            [
                {
                    "id": rid,
                    "namespace": "default",
                    "key": key,
                    "content_hash": key,
                    "source_format": "steps",
                    "task_type": "default",
                    "outcome": outcome,
                    "steps": steps,
                    "extra": {},
                    "status": "done",
                    "attempts": 1,
                    "cards_written": 0,
                    "created_at": at,
                    "task_group": group,
                }
            ],
        )
        s.commit()
    return rid


def add_card(
    engine,
    *,
    runs: list[uuid.UUID],
    preconditions: list[str],
    at: datetime,
    status: str = "active",
    result: dict[str, Any] | None = None,
    provenance: dict[str, Any] | None = None,
    action_sequence: list[dict[str, Any]] | None = None,
    handling: str = "check the seat map first",
) -> uuid.UUID:
    """A warning card learned at `at` from these runs (each a supporting evidence row)."""
    cid = uuid.uuid4()
    with Session(engine) as s:
        s.add(
            Card(
                card_id=cid,
                namespace="default",
                scenario=f"Calling reserve can fail with {SIG!r}",
                preconditions=preconditions,
                action_sequence=action_sequence
                or [{"tool": "reserve", "params_template": {}, "note": "check first"}],
                failure_modes=[{"mode": SIG, "handling": handling}],
                confidence=0.67,
                status=status,
                signature=cid.hex,
                provenance=provenance or {"producer": "rule-extractor", "origin": "agent_action"},
                evidence_count=len(runs),
                run_count=len(runs),
                created_at=at,
                updated_at=at,
            )
        )
        s.flush()
        for rid in runs:
            s.add(
                CardEvidence(
                    card_id=cid,
                    trajectory_id=rid,
                    step=0,
                    result=result
                    or {
                        "error": f"Error: {SIG}",
                        "error_signature": SIG,
                        "outcome": "failure",
                        "role": "supports",
                        "confirms": True,
                    },
                )
            )
        s.commit()
    return cid


def failing(engine, key: str, group: str, at: datetime) -> uuid.UUID:
    """A run whose reserve call fails with the warned error."""
    return add_run(engine, key=key, group=group, at=at, calls=[call("reserve", f"Error: {SIG}")])


def later(engine, n: int, *, start: datetime, right: bool, prefix: str) -> None:
    """n later runs of new tasks calling reserve: failing with the warned error, or fine."""
    for i in range(n):
        add_run(
            engine,
            key=f"{prefix}{i}",
            group=f"id:{prefix}{i}",
            at=start + timedelta(minutes=i),
            calls=[call("reserve", f"Error: {SIG}" if right else None, seat="1a")],
            outcome="failure" if right else "success",
        )


def status(engine, cid: uuid.UUID) -> str:
    with Session(engine) as s:
        card = s.get(Card, cid)
        assert card is not None
        return card.status


def figures(engine, cid: uuid.UUID) -> CardBacktest:
    with Session(engine) as s:
        row = s.get(CardBacktest, cid)
        assert row is not None
        s.expunge(row)
        return row


def history(engine, cid: uuid.UUID) -> list[CardVersion]:
    with Session(engine) as s:
        return list(
            s.execute(
                select(CardVersion).where(CardVersion.card_id == cid).order_by(CardVersion.version)
            ).scalars()
        )


def versions(engine) -> int:
    with Session(engine) as s:
        return int(s.execute(select(func.count()).select_from(CardVersion)).scalar_one())
