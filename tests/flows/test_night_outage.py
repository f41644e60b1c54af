"""An LLM outage during the nightly flow: the rule lessons are all stored, every stage runs,
the summary is published with the dead letters named, and the run ends Failed with what to
do. Also: facts and regeneration wait for the LLM instead of failing the night."""

from __future__ import annotations

import json
import re

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from sqlalchemy import select
from sqlmodel import Session

from flows.nightly import nightly
from flows.params import NightlyParams
from flows.report import DEAD_LETTER_KEY, SUMMARY_KEY
from flows.stages import run_summary
from memory_core.models.card import Card
from memory_core.models.drafts import view_of
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect.dead_letters import list_dead_letters
from memory_core.retrospect.rule_extractor import RuleExtractor
from memory_core.status import trajectory_counts
from tests.helpers.data import REPO
from tests.helpers.scripted_llm import Reply


def _artifacts(flow_run_id) -> dict:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found}


def test_outage_costs_llm_cards_never_rule_cards(llm_env, engine, monkeypatch) -> None:
    server = llm_env(
        lambda body, n: Reply(status=500, error="model crashed"), llm__mode="after_rules"
    )
    state = nightly(NightlyParams(input=[str(REPO / "examples")]), return_state=True)
    summary = run_summary(state)
    assert len(server.requests) > 0
    # every run's rule lesson is stored, as the rule extractor alone makes it
    with Session(engine) as s:
        runs = list(s.execute(select(Trajectory)).scalars())
        cards = list(s.execute(select(Card)).scalars())
    rules = RuleExtractor()
    expected = {d.signature for r in runs for d in rules.extract(view_of(r)).drafts}
    stored = {c.signature for c in cards if c.provenance.get("producer") == rules.name}
    assert expected and stored == expected
    assert all(r.rules_at is not None for r in runs)
    # nothing lost: the LLM part of the runs with tool calls waits as a dead letter
    counts = trajectory_counts(engine=engine)
    assert counts.get("done", 0) + counts["dead_letter"] == 12 and counts["dead_letter"] > 0
    parked = [r for r in runs if r.status == "dead_letter"]
    assert all(r.error.startswith("LLM part: LLMTransient") for r in parked)
    assert {r.dead_letter_run for r in parked} == {str(state.state_details.flow_run_id)}
    # every stage ran after the outage (facts raising LLMTransient included)
    assert summary.validation.evaluated == len(expected) and summary.validation.activated > 0
    assert summary.consolidation.cards_seen > 0 and summary.decay.run_id is not None
    assert summary.outcome.failures == []
    # one line a run, whichever of its parts were parked ("key: error; facts: error")
    facts = [d for d in summary.outcome.dead_letters if "facts: " in d]
    assert facts and all("LLMTransient" in d.split("facts: ")[1] for d in facts)
    run = str(state.state_details.flow_run_id)
    parked_runs = list_dead_letters(engine=engine, run_id=run, limit=None)
    assert len(summary.outcome.dead_letters) == len(parked_runs)  # runs, not parts
    # keys may hold colons (sha256:...): match by prefix
    assert all(
        any(d.startswith(f"{r.key}: ") for d in summary.outcome.dead_letters) for r in parked
    )
    # the run is red with what to do, and its summary is on its page, dead letters named
    n = len(summary.outcome.dead_letters)
    assert (
        state.is_failed() and state.message == f"{n} dead letters: retry this run to re-drive them"
    )
    arts = _artifacts(state.state_details.flow_run_id)
    rows = {r["metric"]: r["value"] for r in json.loads(arts[SUMMARY_KEY].data)}
    assert rows["dead letters"] == n and rows["cards created"] >= len(expected)
    # the failed calls are counted, with why (the summary said "LLM calls 0" before)
    assert rows["LLM calls failed"] >= len(parked), rows
    assert "LLMTransient" in rows["LLM failures, by error"]
    text = arts[DEAD_LETTER_KEY].data
    assert all(r.key in text for r in parked) and "retry this flow run" in text.lower()


def test_a_healthy_night_completes(llm_env, engine) -> None:
    from tests.helpers import fake_model

    def respond(body, n):
        if "durable facts" in body["messages"][0]["content"]:
            return Reply(json.dumps({"facts": []}))
        return fake_model.respond(body, n)

    llm_env(respond, llm__mode="after_rules")
    state = nightly(NightlyParams(input=[str(REPO / "examples")]), return_state=True)
    assert state.is_completed(), state.message
    assert re.fullmatch(r"all stages ran", state.message or "")
    assert trajectory_counts(engine=engine) == {"done": 12}


def test_regeneration_waiting_for_the_llm_turns_the_night_red(llm_env, engine) -> None:
    """A failing LLM draft whose regeneration meets an outage stays a draft, the run is
    Failed saying so, and the next run with the LLM back regenerates it."""
    from tests.helpers import fake_model

    down = {"regenerate": True}

    def respond(body, n):
        kind = fake_model.prompt_kind(body)
        if kind == "cards":  # a draft the suite rejects: its expected outcome is far too long
            out = fake_model.cards(body)
            for c in out["cards"]:
                c["expected_outcome"] = "the call succeeds " * 200
            return Reply(json.dumps(out))
        if kind == "regenerate":
            if down["regenerate"]:
                return Reply(status=503, error="model overloaded")
            card = json.loads(
                body["messages"][1]["content"]
                .split("The card:\n", 1)[1]
                .split("\n\nIt failed", 1)[0]
            )
            card["expected_outcome"] = "the call succeeds"
            return Reply(json.dumps(card))
        if "durable facts" in body["messages"][0]["content"]:
            return Reply(json.dumps({"facts": []}))
        return fake_model.respond(body, n)

    server = llm_env(respond)
    state = nightly(NightlyParams(input=[str(REPO / "examples")]), return_state=True)
    summary = run_summary(state)
    assert summary.validation.deferred > 0 and server.calls("[prompt: regenerate") > 0
    assert state.is_failed()
    assert f"validate: {summary.validation.deferred} failing LLM drafts wait" in state.message
    assert state.message.endswith("retry this run to re-drive them")
    with Session(engine) as s:
        llm = [
            c for c in s.execute(select(Card)).scalars() if c.provenance.get("producer") == "llm"
        ]
    waiting = [c for c in llm if c.status == "draft"]
    assert len(waiting) == summary.validation.deferred

    down["regenerate"] = False
    again = nightly(NightlyParams(), return_state=True)
    assert again.is_completed(), again.message
    with Session(engine) as s:
        for c in waiting:
            card = s.get(Card, c.card_id)
            assert card.status != "draft" and card.provenance.get("regenerated") is True
