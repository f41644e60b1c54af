"""The nightly flow applies each namespace's retention as its own stage: its summary and its
changes report say what went, by kind and namespace, and the old runs' text is gone."""

from __future__ import annotations

from datetime import timedelta

from flows.nightly import nightly
from flows.params import NightlyParams
from flows.report import summary_rows
from flows.stages import run_summary
from memory_core.models.columns import utcnow
from memory_core.retention.policy import set_policy
from tests.flows.test_changes_report import _artifact
from tests.helpers.cli import hindsight
from tests.helpers.retention_data import occurrences, plant_history

MARKER = "zq4-old-night-text"


def test_the_night_removes_old_runs_and_says_what_went(flow_env, engine, env_for) -> None:
    plant_history(engine, namespace="team-a", marker=MARKER, recent="recent-night-text")
    set_policy(engine=engine, namespace="team-a", actor="t", trajectories_days=30, uses_days=30)
    before = utcnow() - timedelta(seconds=1)

    state = nightly(NightlyParams(), return_state=True)

    summary = run_summary(state)
    removed = summary.retention.removed["team-a"]
    assert removed["trajectories"] + removed["summarized"] == 2, removed
    assert removed["uses"] == 1 and removed["queries"] == 1
    rows = {r["metric"]: r["value"] for r in summary_rows(summary)}
    assert rows["trajectories removed by retention"] == removed["trajectories"]
    assert rows["uses and queries removed by retention"] == 2
    assert rows["removed by retention, by namespace"].startswith("team-a: ")
    report = _artifact(state.state_details.flow_run_id)
    assert "**Retention** removed" in report and "| team-a | " in report
    assert f"{removed.get('summarized', 0)} summarized" in report or "summarized" not in removed
    table = hindsight(env_for, "changes", "--since", before.isoformat()).stdout
    assert "retention team-a: " in table
    assert occurrences(flow_env, MARKER) == 0
