"""The decay flow under the Prefect test harness, and the `hindsight decay`, `archive` and
`cards feedback` commands as a user runs them, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

from flows.decay import decay
from flows.params import DecayFlowParams
from memory_core.settings import DecayRules
from memory_core.status import card_counts
from tests.helpers.cli import hindsight
from tests.helpers.decay import NOW, card_row, cards_by_id, dump_state, insert_cards


def test_decay_flow_plans_then_applies_and_names_its_run(flow_env, engine) -> None:
    fresh, faded, cold = insert_cards(engine, [card_row(3), card_row(45), card_row(100)])
    extra = insert_cards(engine, [card_row(1 + i / 10, confidence=0.2) for i in range(3)])
    rules = DecayRules(cap=3)
    before = dump_state(engine)
    dry = decay(DecayFlowParams(dry_run=True, now=NOW, rules=rules))
    assert dump_state(engine) == before
    assert (dry.decayed, dry.archived_unused, dry.archived_cap) == (2, 1, 2)
    assert {c.card_id for c in dry.changes} == {faded, cold, extra[1], extra[2]}

    state = decay(DecayFlowParams(now=NOW, rules=rules), return_state=True)
    done = state.result()
    assert (done.decayed, done.archived_unused, done.archived_cap) == (2, 1, 2)
    assert done.changes == [] and done.run_id is not None
    cards = cards_by_id(engine)
    assert cards[fresh].status == "active" and cards[cold].status == "archived"
    assert [cards[c].status for c in extra] == ["active", "archived", "archived"]
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
        tasks = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id]))
        )
    assert run.name.startswith("decay all ")
    # one task per namespace, each under the run's lease on it (memory_core.leases)
    assert [t.name for t in tasks] == ["decay default"]
    assert done.ran == {"default": 5} and done.elsewhere == []
    again = decay(DecayFlowParams(now=NOW, rules=rules))
    assert (again.decayed, again.archived_unused, again.archived_cap) == (0, 0, 0)


def test_decay_archive_and_feedback_commands(env_for, engine) -> None:
    ok, faded, cold = insert_cards(engine, [card_row(2), card_row(40), card_row(120)])
    now = (NOW + timedelta(hours=1)).isoformat()
    before = dump_state(engine)
    dry = json.loads(hindsight(env_for, "decay", "--dry-run", "--now", now, "-f", "json").stdout)
    assert dump_state(engine) == before
    assert dry["dry_run"] and (dry["decayed"], dry["archived_unused"]) == (2, 1)
    assert {(c["card_id"], c["rule"]) for c in dry["changes"]} == {
        (str(faded), "decay"),
        (str(cold), "decay"),
        (str(cold), "unused"),
    }
    table = hindsight(env_for, "decay", "--dry-run", "--now", now).stdout
    assert "nothing written" in table and "tier 1" in table and "archived" in table
    assert dump_state(engine) == before

    applied = hindsight(env_for, "decay", "--now", now).stdout
    assert "archived: unused" in applied
    assert card_counts(engine=engine) == {"active": 2, "archived": 1}

    listed = json.loads(hindsight(env_for, "archive", "list", "-f", "json").stdout)
    assert [(e["card_id"], e["reason"]) for e in listed] == [(str(cold), "unused")]
    assert "unused 90+ days" in hindsight(env_for, "archive", "list").stdout
    out = hindsight(env_for, "archive", "restore", str(cold), "--by", "ana").stdout
    assert "active again" in out and cards_by_id(engine)[cold].status == "active"
    again = hindsight(env_for, "archive", "restore", str(cold), check=False)
    assert again.returncode == 2 and "not archived" in " ".join(again.stderr.split())
    missing = hindsight(env_for, "archive", "restore", "not-a-uuid", check=False)
    assert missing.returncode == 2 and "card_id" in missing.stderr

    for _ in range(2):
        hindsight(env_for, "cards", "feedback", str(ok), "failure")
    last = hindsight(env_for, "cards", "feedback", str(ok), "failure").stdout
    assert "sent to review" in last and cards_by_id(engine)[ok].status == "review"
    good = json.loads(
        hindsight(env_for, "cards", "feedback", str(faded), "success", "-f", "json").stdout
    )
    assert good["confidence"] == round(0.8 * 0.9 + 0.05, 6) and good["recorded"]
    bad = hindsight(env_for, "cards", "feedback", str(faded), "maybe", check=False)
    assert bad.returncode == 2
