"""The task group is a column with an index, and the contrast reads a group's newest runs."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

from alembic import command
from sqlalchemy import select, text, update
from sqlmodel import Session

from memory_core import db
from memory_core.ingest.store import ingest
from memory_core.models.card import Card
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect import keys, siblings
from memory_core.retrospect.contrast import fit_group
from tests.helpers.pipeline import retrospect_all

LONG_ID = "t" * 300  # a task id longer than the column


def _run(rid: str, outcome: str, cabin: str, task: str = "move-trip") -> dict:
    return {
        "id": rid,
        "task_id": task,
        "outcome": outcome,
        "steps": [
            {"type": "message", "role": "user", "text": "Please move my trip"},
            {"type": "tool_call", "tool": "change_trip", "args": {"cabin": cabin},
             "observation": "ok"},
        ],
    }  # fmt: skip


def _groups(engine) -> dict[str, str | None]:
    with Session(engine) as s:
        return {t.key: t.task_group for t in s.execute(select(Trajectory)).scalars()}


def test_ingest_fills_the_column_and_the_migration_backfills_it(settings, engine) -> None:
    ingest(
        engine=engine,
        records=[("a", _run("a", "success", "economy")), ("b", _run("b", "failure", "x", LONG_ID))],
        namespace="default",
        task_type="default",
    )
    written = _groups(engine)
    assert written["a"] == "id:move-trip"
    assert written["b"] == fit_group(f"id:{LONG_ID}") and len(written["b"]) <= 255
    assert written["b"].startswith("id:sha1:")
    command.downgrade(db.alembic_config(settings.sqlalchemy_url), "0016")
    try:
        with engine.begin() as conn:  # a row stored before its key was fitted to the column
            extra = json.dumps({"task_id": LONG_ID, siblings.GROUP_KEY: f"id:{LONG_ID}"})
            conn.execute(text("UPDATE trajectory SET extra = :e WHERE key = 'b'"), {"e": extra})
    finally:
        db.upgrade(settings, "head")  # the session's PostgreSQL database serves later tests
    assert _groups(engine) == written


def test_the_contrast_reads_the_newest_runs_of_a_group(engine, monkeypatch) -> None:
    monkeypatch.setattr(siblings, "GROUP_RUNS", 4)
    # one task here: let a feature of one task key a caution (the window is what is tested)
    monkeypatch.setattr(keys, "MIN_GROUPS", 1)
    old = [("o1", _run("o1", "failure", "business")), ("o2", _run("o2", "success", "economy"))]
    ingest(engine=engine, records=old, namespace="default", task_type="default")
    with Session(engine) as s, s.begin():  # stored a day before the others
        s.execute(update(Trajectory).values(created_at=utcnow() - timedelta(days=1)))
    new = [(k, _run(k, "success", "economy")) for k in ("n1", "n2", "n3", "n4")]
    ingest(engine=engine, records=new, namespace="default", task_type="default")
    retrospect_all(engine)
    with Session(engine) as s:
        cautions = [
            c
            for c in s.execute(select(Card)).scalars()
            if c.provenance.get("pattern") == "contrast_caution"
        ]
    # the old failure is outside the four newest runs: nothing to contrast it with
    assert cautions == []
    monkeypatch.setattr(siblings, "GROUP_RUNS", 64)
    with Session(engine) as s, s.begin():  # the same runs, read again with a wider window
        s.execute(update(Trajectory).values(status="pending"))
    retrospect_all(engine)
    with Session(engine) as s:
        found = [
            c.preconditions
            for c in s.execute(select(Card)).scalars()
            if c.provenance.get("pattern") == "contrast_caution"
        ]
    assert found == [['tool == "change_trip"', 'args.cabin == "business"']]


def test_a_group_lookup_uses_the_index(engine) -> None:
    ns, group = "default", "id:" + uuid.uuid4().hex
    query = select(Trajectory.id).where(*siblings.siblings_of(ns, group))
    sql = str(query.compile(engine, compile_kwargs={"literal_binds": True}))
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            plan = conn.execute(text(f"EXPLAIN QUERY PLAN {sql}")).all()
        else:  # an empty table is read whole whatever the indexes: ask for the index's plan
            conn.execute(text("SET LOCAL enable_seqscan = off"))
            plan = conn.execute(text(f"EXPLAIN {sql}")).all()
    assert "ix_trajectory_task_group" in " ".join(str(r) for r in plan), plan
