"""`hindsight namespace list` and `delete`: counts, the confirmation, and a deletion killed
half-way then run again."""

from __future__ import annotations

import json

from sqlalchemy import insert, text

from memory_core.models import Card, CardVersion
from memory_core.namespaces.counts import namespace_counts
from tests.helpers.cli import hindsight, kill_at
from tests.helpers.namespace_data import plant
from tests.helpers.retention_data import occurrences

MARKER = "kill9-marker-x5"
GONE = f"ns-{MARKER}"


def test_list_counts_each_namespace(settings, engine, env_for) -> None:
    plant(engine, settings, namespace="team-a", marker="a-text", n=2)
    plant(engine, settings, namespace="team-b", marker="b-text", n=1)
    out = json.loads(hindsight(env_for, "namespace", "list", "--format", "json").stdout)
    assert [n["namespace"] for n in out] == ["team-a", "team-b"]
    a = out[0]
    assert a["cards"] == {"active": 2, "rejected": 1} and a["facts"] == {"active": 2}
    assert (a["trajectories"], a["dead_letters"], a["keys"]) == (2, 1, 1)
    assert out[1]["cards"] == {"active": 1, "rejected": 1} and out[1]["trajectories"] == 1
    shown = hindsight(env_for, "namespace", "list").stdout
    assert "team-a" in shown and "active 2" in shown


def test_delete_asks_first_and_a_no_deletes_nothing(settings, engine, env_for) -> None:
    plant(engine, settings, namespace="team-a", marker="a-text", n=1)
    before = namespace_counts(engine)
    refused = hindsight(env_for, "namespace", "delete", "team-a", stdin="n\n", check=False)
    assert refused.returncode == 1 and "nothing deleted" in refused.stderr
    assert namespace_counts(engine) == before
    done = hindsight(env_for, "namespace", "delete", "team-a", stdin="y\n")
    assert "deleted" in done.stdout and namespace_counts(engine) == []


def _many_cards(engine, n: int) -> None:
    """n more cards with a version each, so the deletion takes long enough to be killed."""
    cards = [
        Card(namespace=GONE, scenario=f"{MARKER} bulk {i}", signature=f"bulk-{i}", confidence=0.5)
        for i in range(n)
    ]
    with engine.begin() as conn:
        conn.execute(insert(Card), [c.model_dump() for c in cards])
        conn.execute(
            insert(CardVersion),
            [
                CardVersion(
                    card_id=c.card_id, version=1, snapshot={"s": MARKER}, reason="t", actor="t"
                ).model_dump()
                for c in cards
            ],
        )


def test_a_deletion_killed_half_way_finishes_when_run_again(settings, engine, env_for) -> None:
    plant(engine, settings, namespace=GONE, marker=MARKER, n=2)
    plant(engine, settings, namespace="team-kept", marker="kept-text", n=1)
    _many_cards(engine, 20_000)
    kept = namespace_counts(engine, "team-kept")
    # the uses are gone; the cards are next
    kill_at(env_for, "card_use:", "namespace", "delete", GONE, "--yes")
    with engine.connect() as conn:
        left = conn.execute(text("SELECT COUNT(*) FROM card WHERE namespace = :ns"), {"ns": GONE})
        assert left.scalar() > 0  # killed half-way
        assert conn.execute(text("SELECT COUNT(*) FROM namespace_deletion")).scalar() == 0

    hindsight(env_for, "namespace", "delete", GONE, "--yes", process=True)
    assert namespace_counts(engine, GONE) == []
    assert namespace_counts(engine, "team-kept") == kept
    assert occurrences(settings, MARKER) == 0
