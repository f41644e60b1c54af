"""`hindsight namespace retention`: the policy shown and set, and applied now; a run killed in
the middle leaves whole batches, and running it again ends clean."""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import insert, text

from memory_core.models import Trajectory
from memory_core.models.columns import utcnow
from tests.helpers.cli import hindsight, kill_at
from tests.helpers.retention_data import OLD, occurrences, plant_history

MARKER = "zq5-killed-run-text"
RECENT = "recent-cli-text-3w"


def _policy(env, *args: str) -> dict:
    out = hindsight(env, "namespace", "retention", "team-a", *args, "-f", "json").stdout
    return json.loads(out)


def test_the_policy_is_shown_set_and_returned_to_the_settings(settings, env_for) -> None:
    shown = _policy(env_for)
    assert shown["trajectories_days"] == 0 and shown["uses_days"] == 30  # the settings'
    assert shown["own_trajectories_days"] is None and shown["last_run_at"] is None
    got = _policy(env_for, "--trajectories-days", "90", "--uses-days", "7")
    assert (got["trajectories_days"], got["uses_days"], got["set_by"]) == (90, 7, "cli")
    got = _policy(env_for, "--uses-days", "0")  # one at a time: the other stays
    assert (got["own_trajectories_days"], got["own_uses_days"]) == (90, 0)
    table = hindsight(env_for, "namespace", "retention", "team-a").stdout
    assert "trajectories: 90 days (this namespace's)" in table
    assert "uses and queries: keep all" in table and "never ran" in table
    got = _policy(env_for, "--default")
    assert got["own_trajectories_days"] is None and got["uses_days"] == 30
    bad = hindsight(env_for, "namespace", "retention", "team-a", "--uses-days", "-1", check=False)
    assert bad.returncode != 0


def _many_old_runs(engine, n: int) -> None:
    then = utcnow() - OLD
    rows = [
        Trajectory(
            namespace="team-a",
            key=f"bulk-{i}",
            content_hash=hashlib.sha256(f"bulk-{i}".encode()).hexdigest(),
            source_format="steps",
            task_type="bulk",
            steps=[{"index": 0, "type": "message", "text": f"{MARKER} bulk {i}"}],
            status="done",
            created_at=then,
        ).model_dump()
        for i in range(n)
    ]
    with engine.begin() as conn:
        conn.execute(insert(Trajectory), rows)


def _half_done(engine) -> tuple[int, int]:
    """Old runs still holding their steps, and old runs left with a summary's empty steps but
    not marked one (a batch written half: never)."""
    with engine.connect() as conn:
        steps = [
            str(s)
            for s in conn.execute(
                text(
                    "SELECT steps FROM trajectory WHERE namespace = 'team-a' AND key LIKE 'bulk-%'"
                )
            ).scalars()
        ]
    return sum(1 for s in steps if MARKER in s), sum(1 for s in steps if MARKER not in s)


def test_a_retention_killed_half_way_ends_clean_when_run_again(settings, engine, env_for):
    plant_history(engine, namespace="team-a", marker=MARKER, recent=RECENT)
    _many_old_runs(engine, 6000)
    _policy(env_for, "--trajectories-days", "30", "--uses-days", "30")
    # the first batch is in; the others are not
    kill_at(env_for, "so far:", "namespace", "retention", "team-a", "--apply")
    left, emptied = _half_done(engine)
    assert 0 < left < 6000 and emptied == 0  # whole batches gone, none half-written

    got = _policy(env_for, "--apply")
    assert left <= got["last_removed"]["trajectories"] <= left + 1  # and the dead letter
    with engine.connect() as conn:
        kept = conn.execute(text("SELECT key FROM trajectory WHERE namespace = 'team-a'"))
        assert sorted(kept.scalars()) == ["team-a-new", "team-a-old-cited"]
    assert occurrences(settings, MARKER) == 0 and occurrences(settings, RECENT) > 0
    assert _half_done(engine) == (0, 0)
    again = _policy(env_for, "--apply")
    assert again["last_removed"] == {}
