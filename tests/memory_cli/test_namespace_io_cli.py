"""`hindsight namespace export` and `import`: a file written, read back into another name, and
a broken file refused by line with nothing written."""

from __future__ import annotations

import json

from memory_core.db import session_scope
from memory_core.models import Card
from memory_core.namespaces.counts import namespace_counts
from tests.helpers.cli import hindsight
from tests.helpers.namespace_history import history
from tests.helpers.serve import add_card


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
    assert "card 0 new of 5" in again.stdout and "not stored" not in again.stdout
    # a card beside another live card with its signature: said, not skipped in silence
    lone = add_card(engine, namespace="team-a", scenario="a lesson with no evidence")
    held = add_card(engine, namespace="team-d", scenario="team-d's own lesson")
    with session_scope(engine) as s:
        row = s.get(Card, held.card_id)
        row.signature = lone.signature
        s.add(row)
    file.write_text(hindsight(env_for, "namespace", "export", "team-a").stdout)
    told = hindsight(env_for, "namespace", "import", str(file), "--into", "team-d").stdout
    assert "card 5 new of 6" in told
    assert "1 card(s) of the file not stored: the namespace holds another live card" in told

    file.write_text("\n".join([*lines[:4], "{oops", *lines[4:]]) + "\n")
    bad = hindsight(env_for, "namespace", "import", str(file), "--into", "team-c", check=False)
    assert bad.returncode == 2 and "line 5: not JSON" in bad.stderr
    assert namespace_counts(engine, "team-c") == []
