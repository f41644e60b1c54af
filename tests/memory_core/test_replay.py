"""Replay: hits, misses and noise on runs where the answer is known, and nothing written."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select, text
from sqlmodel import Session, SQLModel

from memory_core.ingest.store import ingest
from memory_core.models.card import Card
from memory_core.replay import card_warns, parse_all, replay
from memory_core.replay_report import Verdict
from memory_core.validate.stage import validate_drafts
from tests.helpers.cli import hindsight
from tests.helpers.data import tau_runs
from tests.helpers.pipeline import retrospect_all


def _learn(engine, records: list[dict[str, Any]]) -> None:
    report = ingest(
        engine=engine,
        records=[(f"r{i}", r) for i, r in enumerate(records)],
        namespace="default",
        task_type="default",
    )
    assert report.stored == len(records)
    retrospect_all(engine)
    validate_drafts(engine=engine, reports_dir=None, review_below=0.0)


def _run(rid: str, *calls: tuple[str, str | None]) -> dict[str, Any]:
    steps = []
    for tool, error in calls:
        step: dict[str, Any] = {"type": "tool_call", "tool": tool, "args": {"q": rid}}
        if error:
            step["error"] = error
        else:
            step["observation"] = "ok"
        steps.append(step)
    return {"id": rid, "outcome": "success", "steps": steps}


def _snapshot(engine) -> dict[str, Any]:
    """Every row of every table (what a replay must leave as it was)."""
    out = {}
    with engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            rows = conn.execute(text(f"SELECT * FROM {table.name}")).all()
            out[table.name] = sorted(map(repr, rows))
    return out


def test_hit_miss_noise_on_a_constructed_case(engine) -> None:
    # learned: search fails with a rate limit (429) and succeeds on retry
    _learn(
        engine,
        [
            _run(
                "learned",
                ("search", "Error: rate limit exceeded for key abc123, status 429"),
                ("search", None),
            )
        ],
    )
    with Session(engine) as s:
        assert s.execute(select(func.count()).select_from(Card)).scalar() == 2
    new = [
        _run(
            "new",
            ("search", "Error: rate limit exceeded for key zz999, status 429"),  # warned: hit
            ("book", "Error: seat 12A is taken"),  # nothing known about book: miss
            ("search", None),  # a search card served, the call succeeded: noise
            ("lookup", None),  # nothing served, success: quiet
        )
    ]
    parsed, refused = parse_all([("new", r) for r in new], namespace="default", task_type="default")
    assert not refused
    before = _snapshot(engine)
    report = replay(engine=engine, namespace="default", trajectories=parsed, top_k=5)
    assert _snapshot(engine) == before  # nothing written, no use recorded
    verdicts = [c.verdict for c in report.trajectories[0].calls]
    assert verdicts == [Verdict.hit, Verdict.miss, Verdict.noise, Verdict.quiet]
    t = report.totals
    assert (t.calls, t.failed, t.hit, t.miss, t.noise, t.quiet) == (4, 2, 1, 1, 1, 1)
    assert report.hit_rate == 0.5 and report.noise_rate == 0.5
    first = report.trajectories[0].calls[0]
    assert first.signature == "rate limit exceeded for key <id>, status 429"
    assert first.code == "429" and first.served[0].warned
    # the call about to be made is what the warning was keyed on; pre-call-only agrees
    pre = replay(
        engine=engine, namespace="default", trajectories=parsed, top_k=5, pre_call_only=True
    )
    assert [c.verdict for c in pre.trajectories[0].calls] == verdicts


def test_a_warning_names_the_error_by_signature_or_code() -> None:
    card = Card(
        scenario="x",
        signature="s",
        failure_modes=[{"mode": "The API answers 429 when the search quota is used up"}],
        preconditions=['last_error_code == "ConnectionRefused"'],
    )
    assert card_warns(card, signature="whatever", code="ConnectionRefused")
    assert not card_warns(card, signature="<n>", code="")  # a bare number matches nothing
    assert card_warns(card, signature="search quota is used up", code="")
    assert not card_warns(card, signature="seat is taken", code="")


def test_learn_from_some_tau_tasks_replay_the_others(engine) -> None:
    runs = tau_runs()
    tasks = sorted({r["task_id"] for r in runs})
    learn = [r for r in runs if r["task_id"] in tasks[::2]]
    other = [r for r in runs if r["task_id"] not in tasks[::2]]
    _learn(engine, learn)
    parsed, _ = parse_all(
        [(str(i), r) for i, r in enumerate(other)], namespace="default", task_type="default"
    )
    before = _snapshot(engine)
    report = replay(engine=engine, namespace="default", trajectories=parsed, top_k=3)
    assert _snapshot(engine) == before
    t = report.totals
    assert t.trajectories == len(other) and t.calls == t.hit + t.miss + t.noise + t.quiet
    assert t.failed == t.hit + t.miss and t.failed > 0
    # errors seen while learning come back as warnings for other tasks' runs
    learned = {
        c.signature
        for r in replay(
            engine=engine,
            namespace="default",
            trajectories=parse_all(
                [(str(i), r) for i, r in enumerate(learn)],
                namespace="default",
                task_type="default",
            )[0],
            top_k=10,
        ).trajectories
        for c in r.calls
        if c.signature
    }
    known = [
        c for r in report.trajectories for c in r.calls if c.signature and c.signature in learned
    ]
    assert known and sum(c.verdict is Verdict.hit for c in known) >= len(known) // 2
    for r in report.trajectories:
        for c in r.calls:
            if c.verdict is Verdict.hit:
                assert any(s.warned for s in c.served)
            if c.verdict is Verdict.quiet:
                assert not c.served


def test_cli_replay_json(env_for, engine, tmp_path) -> None:
    _learn(engine, [_run("learned", ("search", "Error: HTTP 503 busy"), ("search", None))])
    path = str(tmp_path / "replay.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps(_run("x", ("search", "Error: HTTP 503 busy"), ("search", None))) + "\n")
    proc = hindsight(env_for, "replay", path, "--format", "json", "--top-k", "2", check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["totals"]["hit"] == 1 and out["totals"]["noise"] == 1 and out["top_k"] == 2
    table = hindsight(env_for, "replay", path, check=False)
    assert table.returncode == 0 and "warned before 1 of 1 failed calls" in table.stdout
