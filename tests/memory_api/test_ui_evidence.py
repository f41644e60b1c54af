"""A card's evidence as a person reads it: a table of runs and calls whose links land on the
cited call of the run's page, whatever the input format; actions shown as text."""

from __future__ import annotations

import html
import json
import re

import pytest
from sqlalchemy import delete

from memory_api.app import create_app
from memory_core.cards.profile import PROFILE
from memory_core.db import session_scope
from memory_core.facts.stage import extract_facts
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardEvidence
from memory_core.models.trajectory import Trajectory
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card
from tests.helpers.ui import seed, signed_in


@pytest.fixture
def ui(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    with LiveServer(create_app(svc)) as server:
        yield server, seeded


def _call(name: str, args: str, cid: str) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        ],
    }


def _ingest_chat(engine, run: str, messages: list[dict], task_type: str) -> None:
    report = ingest(
        engine=engine,
        records=[("t0", {"id": run, "messages": messages})],
        namespace="team-a",
        task_type=task_type,
        max_observation_chars=2000,
    )
    assert report.stored == 1, report


def test_evidence_of_a_chat_run_links_the_cited_call_and_actions_read_as_text(ui, engine) -> None:
    server, s = ui
    messages = [
        {"role": "system", "content": "you help"},
        {"role": "user", "content": "find my order"},
        _call("search", '{"q": "order"}', "c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "nothing"},
        {"role": "assistant", "content": "let me look it up"},
        _call("lookup", '{"order_id": "<string>"}', "c2"),
        {"role": "tool", "tool_call_id": "c2", "content": "Error: order not found"},
    ]
    _ingest_chat(engine, "chat-run-7", messages, "orders")
    card = add_card(engine, scenario="lookup of an unknown order", tool="lookup")
    with session_scope(engine) as session:
        run = next(t for t in session.query(Trajectory).all() if t.key == "chat-run-7")
        calls = [x["index"] for x in run.steps if x.get("type") == "tool_call" and x.get("tool")]
        assert len(calls) == 2 and calls[1] != 1  # the page counts more than the calls
        row = session.get(Card, card.card_id)
        row.action_sequence = [{"tool": "lookup", "params_template": {"order_id": "<string>"}}]
        row.evidence_count = 1
        session.add(row)
        session.add(
            CardEvidence(
                card_id=card.card_id,
                trajectory_id=run.id,
                step=1,  # the run's second tool call
                action={"tool": "lookup", "args": {"order_id": "<string>"}},
                result={"error": "order not found", "outcome": "failure", "role": "supports"},
            )
        )
        run_id = run.id
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get(f"/ui/cards/{card.card_id}").text
        link = f"/ui/trajectories/{run_id}?step={calls[1]}#step-{calls[1]}"
        assert f'href="{link}"' in page
        row = re.search(r'<table class="evidence">.*?</table>', page, re.S).group(0)
        text = html.unescape(re.sub(r"<[^>]+>", " ", row))
        assert "chat-run-7" in text and "supports" in text and "orders" in text
        assert '"order_id": "<string>"' in text and "error: order not found" in text
        at = page.find("\\u003c")
        assert at < 0, page[at - 300 : at + 100]
        assert "&lt;string&gt;" in page
        target = c.get(link).text
    # the step the link lands on is the call the evidence cites
    assert re.search(rf'id="step-{calls[1]}"[^>]*>.*?lookup', target, re.S), target[-3000:]


def test_a_card_address_takes_the_id_prefix_the_tables_show(ui) -> None:
    server, s = ui
    held, foreign = s.cards["held"].card_id, s.cards["foreign"].card_id
    with signed_in(server.url, s.keys["read"]) as c:
        r = c.get(f"/ui/cards/{str(held)[:8]}")
        assert r.status_code == 303 and r.headers["location"] == f"/ui/cards/{held}"
        assert c.get(r.headers["location"]).status_code == 200
        # another namespace's card is not found by its prefix either
        r = c.get(f"/ui/cards/{str(foreign)[:8]}")
        assert r.status_code == 404 and "text/html" in r.headers["content-type"]
        r = c.get("/ui/cards/zz")
        assert r.status_code in (400, 422) and "not a card id" in r.text
        assert "text/html" in r.headers["content-type"]


def test_a_fact_names_its_corroborating_run_and_a_removed_run_as_plain_text(ui, engine) -> None:
    server, s = ui
    lookup = _call("lookup_account", json.dumps({"account_id": "acct-1"}), "c1")
    messages = [
        {"role": "system", "content": "You help the customers of a shop."},
        {"role": "user", "content": "I'm a gold member."},
        lookup,
        {"role": "tool", "tool_call_id": "c1", "content": '{"membership": "gold"}'},
        {"role": "assistant", "content": "Noted."},
    ]
    _ingest_chat(engine, "member-run-1", messages, "support")
    assert extract_facts(engine=engine, namespace="team-a").corroborated == 1
    with session_scope(engine) as session:
        run = next(t for t in session.query(Trajectory).all() if t.key == "member-run-1")
        fact = next(c for c in session.query(Card).all() if c.standing == "corroborated")
        run_id, fact_id = run.id, fact.card_id
        step = fact.provenance["corroboration"][0]["step"]
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get(f"/ui/cards/{fact_id}").text
        link = f"/ui/trajectories/{run_id}?step={step}#step-{step}"
        assert f'href="{link}"' in page and "member-run-1" in page
        assert "run removed" not in page
        assert c.get(link).status_code == 200
        with session_scope(engine) as session:  # the run goes, as retention removes one
            session.execute(delete(Trajectory).where(Trajectory.id == run_id))
        page = c.get(f"/ui/cards/{fact_id}").text
        assert f"/ui/trajectories/{run_id}" not in page
        said = html.unescape(re.sub(r"<[^>]+>", " ", page))
        assert f"lookup_account  at step {step} of run  {run_id}  (run removed)" in said
        assert c.get(link).status_code == 404  # the page the link would have led to


def _bulk_runs(engine, card: Card, n: int) -> list:
    """n runs of one tool call each, and a piece of the card's evidence on each."""
    runs = [
        Trajectory(
            namespace="team-a",
            key=f"bulk-run-{i}",
            content_hash=f"{i:064d}",
            source_format="json",
            task_type="bulk",
            outcome="failure",
            steps=[{"type": "tool_call", "tool": "search", "index": 0}],
        )
        for i in range(n)
    ]
    with session_scope(engine) as session:
        session.add_all(runs)
        session.flush()
        session.add_all(
            CardEvidence(card_id=card.card_id, trajectory_id=t.id, step=0, action={"tool": "x"})
            for t in runs
        )
        row = session.get(Card, card.card_id)
        row.evidence_count = row.run_count = n
        session.add(row)
    return [t.id for t in runs]


def test_a_card_with_more_evidence_runs_than_a_page_gets_every_runs_details(ui, engine) -> None:
    """Every run asked for comes back (in chunks, none dropped), and the page says its evidence
    table is the first 100 pieces, oldest first, each row with its run's details."""
    from memory_core.serve.browse import RUNS_CHUNK, runs_of

    server, s = ui
    card = add_card(engine, scenario="a lesson from many runs", tool="search")
    ids = _bulk_runs(engine, card, 2 * RUNS_CHUNK + 7)
    other = s.cards["foreign"].card_id  # not a run of team-a: nothing comes back for it
    found = runs_of(engine=engine, namespace="team-a", trajectory_ids=[*ids, *ids[:5], other])
    assert set(found) == set(ids)
    assert found[ids[-1]].key == f"bulk-run-{len(ids) - 1}" and found[ids[-1]].call_steps == [0]
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get(f"/ui/cards/{card.card_id}").text
    assert f"The first 100 of {len(ids)} pieces, oldest first." in page
    table = re.search(r'<table class="evidence">.*?</table>', page, re.S).group(0)
    rows = re.findall(r"<tr>\s*<td>(.*?)</td>", table, re.S)
    assert len(rows) == 100 and all("bulk-run-" in r for r in rows), rows[:3]


def test_a_reminders_profile_reads_as_the_calls_it_was_seen_with(ui, engine) -> None:
    server, s = ui
    card = add_card(engine, scenario="booking fails", tool="book", preconditions=['tool == "book"'])
    with session_scope(engine) as session:
        row = session.get(Card, card.card_id)
        row.provenance = {
            **row.provenance,
            PROFILE: [
                {"expr": 'args.cabin == "business"', "text": 'cabin = "business"'},
                {"expr": 'args.user.matches("^user_[0-9]+$")', "text": "user is user_<digits>"},
            ],
        }
        session.add(row)
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get(f"/ui/cards/{card.card_id}").text
        plain = c.get(f"/ui/cards/{s.cards['lookup'].card_id}").text
    said = re.search(r'<p class="seen-with">(.*?)</p>', page, re.S)
    assert said, page[-3000:]
    text = html.unescape(re.sub(r"<[^>]+>", "", said.group(1)))
    assert text.startswith('Seen with: cabin = "business", user is user_<digits>.')
    assert 'class="seen-with"' not in plain
