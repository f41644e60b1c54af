"""`hindsight namespace export` and `import`: a file written, read back into another name, and
a broken file refused by line with nothing written."""

from __future__ import annotations

import json

from memory_core.namespaces.counts import namespace_counts
from tests.helpers.cli import hindsight
from tests.helpers.namespace_history import history


def test_export_then_import_under_another_name(settings, engine, env_for, tmp_path) -> None:
    history(engine, "team-a")
    out = hindsight(env_for, "namespace", "export", "team-a", "--with-trajectories")
    lines = out.stdout.splitlines()
    assert json.loads(lines[0])["namespace"] == "team-a" and len(lines) == 1 + 2 + 5 + 7 + 10
    assert "5 card" in out.stderr
    file = tmp_path / "team-a.jsonl"
    file.write_text(out.stdout)
    got = hindsight(env_for, "namespace", "import", str(file), "--into", "team-b", "-f", "json")
    assert json.loads(got.stdout)["added"]["card"] == 5
    (a,) = namespace_counts(engine, "team-a")
    (b,) = namespace_counts(engine, "team-b")
    assert (a.cards, a.facts, a.trajectories) == (b.cards, b.facts, b.trajectories)
    again = hindsight(env_for, "namespace", "import", str(file), "--into", "team-b")
    assert "card 0 new of 5" in again.stdout

    file.write_text("\n".join([*lines[:4], "{oops", *lines[4:]]) + "\n")
    bad = hindsight(env_for, "namespace", "import", str(file), "--into", "team-c", check=False)
    assert bad.returncode == 2 and "line 5: not JSON" in bad.stderr
    assert namespace_counts(engine, "team-c") == []
