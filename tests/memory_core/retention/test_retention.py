"""Retention removes a namespace's old runs and uses leaving none of their text in the database
files, keeps the runs cards cite as summaries their pages still explain, leaves recent runs and
other namespaces as they were, and changes nothing when run again."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlmodel import Session, select

from hindsight.client import Client, Forbidden, InvalidRequest
from memory_api.app import create_app
from memory_core.models import LLMAnswer, Trajectory
from memory_core.namespaces.answers import RetentionIn
from memory_core.retention.policy import policy_of, set_policy
from memory_core.retention.stage import retention_all
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from tasks.plain import retention_run
from tests.helpers.retention_data import SIGNATURE, occurrences, plant_history
from tests.helpers.serve import LiveServer, keys_for
from tests.helpers.ui import signed_in

MARKER = "zq9-old-run-text"
RECENT = "recent-run-text-5k"
OTHER = "other-team-text-7p"
TABLES = (
    "trajectory",
    "card",
    "card_evidence",
    "llm_answer",
    "card_backtest",
    "trace_span",
    "card_use",
    "query_log",
)


def _rows(engine, namespace: str) -> dict[str, list[tuple]]:
    """Every row of the namespace in each table that holds its runs' traces, as stored."""
    by = {
        "card_evidence": "card_id IN (SELECT card_id FROM card WHERE namespace = :ns)",
    }
    out = {}
    with engine.connect() as conn:
        for t in TABLES:
            where = by.get(t, "namespace = :ns")
            rows = conn.execute(text(f"SELECT * FROM {t} WHERE {where}"), {"ns": namespace})
            out[t] = sorted((tuple(str(v) for v in r) for r in rows), key=str)
    return out


def _night(settings, engine) -> dict[str, dict[str, int]]:
    """The retention stage as the in-process night runs it, over every namespace."""
    return retention_all(
        engine=engine, namespace=None, part=lambda ns: retention_run(ns, settings)
    ).removed


def test_old_runs_leave_no_text_and_the_rest_is_untouched(settings, engine) -> None:
    old = plant_history(engine, namespace="team-a", marker=MARKER, recent=RECENT)
    plant_history(engine, namespace="team-b", marker=OTHER, recent=OTHER)
    set_policy(engine=engine, namespace="team-a", actor="t", trajectories_days=30, uses_days=30)
    set_policy(engine=engine, namespace="team-b", actor="t", uses_days=0)  # keeps all
    other = _rows(engine, "team-b")
    assert occurrences(settings, MARKER) > 0 and occurrences(settings, RECENT) > 0

    removed = _night(settings, engine)

    assert removed["team-a"] == {
        "backtest_runs": 1,
        "evidence": 1,
        "llm_answers": 3,  # the two old runs' and the answer about a group of runs
        "queries": 1,
        "summarized": 1,
        "trace_spans": 1,
        "trajectories": 1,
        "uses": 1,
    }
    assert removed["team-b"] == {}
    assert occurrences(settings, MARKER) == 0
    assert occurrences(settings, RECENT) > 0 and occurrences(settings, OTHER) > 0
    assert _rows(engine, "team-b") == other
    with Session(engine) as session:
        runs = {
            t.id: t
            for t in session.exec(select(Trajectory).where(Trajectory.namespace == "team-a"))
        }
        answers = sorted(
            a.prompt_id
            for a in session.exec(select(LLMAnswer).where(LLMAnswer.namespace == "team-a"))
        )
    assert set(runs) == {old.cited, old.recent}
    summary = runs[old.cited]
    assert summary.steps == [] and summary.error is None and summary.extra == {"summary": True}
    assert summary.key == "team-a-old-cited" and summary.outcome == runs[old.recent].outcome
    assert answers == ["judge.v1", "p"]  # the cards' judge and the recent run's stay
    policy = policy_of(engine, settings.decay, "team-a")
    assert policy.last_removed == removed["team-a"] and policy.last_run_at is not None

    kept = _rows(engine, "team-a")
    again = _night(settings, engine)
    assert again == {"team-a": {}, "team-b": {}}
    assert _rows(engine, "team-a") == kept and _rows(engine, "team-b") == other
    assert policy_of(engine, settings.decay, "team-a").last_removed == {}


def test_a_summarized_run_still_explains_its_card(settings, engine) -> None:
    old = plant_history(engine, namespace="team-a", marker=MARKER, recent=RECENT)
    set_policy(engine=engine, namespace="team-a", actor="t", trajectories_days=30)
    _night(settings, engine)
    key = create_key(engine=engine, namespace="team-a", scopes=["admin"], name="t")[1]
    app = create_app(MemoryService(engine=engine, settings=settings))
    with LiveServer(app) as server, signed_in(server.url, key) as c:
        page = c.get(f"/ui/cards/{old.card}")
        assert page.status_code == 200
        body = page.text
        run = c.get(f"/ui/trajectories/{old.cited}")
        ns_page = c.get("/ui/namespace").text
    assert "team-a-old-cited" in body and "team-a-new" in body  # both runs named
    assert f"error: {SIGNATURE}" in body and "[removed]" in body
    assert f"{RECENT} order not found" in body  # the recent evidence as it was
    assert MARKER not in body and "Evidence (" in body
    assert run.status_code == 200 and MARKER not in run.text
    assert "kept 30 days" in ns_page and "1 trajectories" in ns_page
    assert "1 summarized" in ns_page


def test_an_admin_key_reads_and_sets_its_namespaces_policy(settings, engine) -> None:
    keys = keys_for(engine)
    app = create_app(MemoryService(engine=engine, settings=settings))
    with LiveServer(app) as server, Client(server.url, keys["admin"]) as admin:
        shown = admin.namespace_retention()
        assert (shown.trajectories_days, shown.uses_days) == (0, 30)  # the settings'
        got = admin.namespace_retention_set(RetentionIn(trajectories_days=90))
        assert (got.trajectories_days, got.own_uses_days, got.uses_days) == (90, None, 30)
        assert got.set_by and got.namespace == "team-a"
        assert admin.namespace_retention_set(RetentionIn(clear=True)).own_trajectories_days is None
        with pytest.raises(InvalidRequest):
            admin.namespace_retention_set(RetentionIn.model_construct(uses_days=-1))
        with Client(server.url, keys["read"]) as reader, pytest.raises(Forbidden):
            reader.namespace_retention()
    assert policy_of(engine, settings.decay, "team-b").set_by is None  # its own only
