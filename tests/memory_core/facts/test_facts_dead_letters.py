"""The facts stage when the LLM fails: an unusable answer gets the repair prompt; a
run whose LLM facts still fail (invalid answer, outage, refusal) is parked as a dead letter,
listed with the others, re-driven, and named in (and recovered by a Retry of) the nightly."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlmodel import Session

from flows.nightly import nightly
from flows.params import NightlyParams
from flows.stages import run_summary
from memory_core.facts.llm import LLMFactExtractor
from memory_core.facts.marks import MARKER
from memory_core.facts.stage import extract_facts
from memory_core.ingest.store import ingest, read_records
from memory_core.llm.cache import SQLAnswerCache
from memory_core.llm.client import OpenAICompatibleLLM
from memory_core.models.card import Card, CardStatus
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect.dead_letters import (
    FACTS_DEAD_LETTER,
    REJECTED,
    dead_letter_error,
    list_dead_letters,
    list_rejections,
    redrive,
)
from tests.helpers import fake_model
from tests.helpers.cli import hindsight
from tests.helpers.scripted_llm import Reply, ScriptedLLM

FACT = {
    "subject": "Dev",
    "attribute": "job",
    "value": "paramedic",
    "question": "What is Dev's job?",
    "turn": "S1:0",
    "confidence": 0.9,
}
GOOD = json.dumps({"facts": [FACT]})
UNSEEN_TURN = json.dumps({"facts": [{**FACT, "turn": "Z9:9"}]})
UNPARSABLE = [
    "I could not find anything durable, sorry!",
    json.dumps({"facts": [{"subject": "Dev", "value": "x"}]}),
]


def _ingest(engine, namespace: str = "ns") -> str:
    doc = {
        "conversation": {
            "session_1_date_time": "9 June, 2024",
            "session_1": [
                {"speaker": "Dev", "dia_id": "S1:0", "text": "Long shift on the ambulance again."}
            ],
        }
    }
    report = ingest(
        engine=engine,
        records=read_records(json.dumps(doc), name="t"),
        namespace=namespace,
        task_type="chat",
    )
    assert report.refused == []
    with Session(engine) as s:
        return s.execute(select(Trajectory.key)).scalar_one()


def _extractor(engine, server) -> LLMFactExtractor:
    llm = OpenAICompatibleLLM(base_url=server.url, model="scripted-1", api_key=None)
    return LLMFactExtractor(llm=llm, cache=SQLAnswerCache(engine))


def _row(engine) -> Trajectory:
    with Session(engine) as s:
        return s.execute(select(Trajectory)).scalar_one()


def _llm_facts(engine) -> dict[str, str]:
    with Session(engine) as s:
        cards = s.execute(select(Card).where(Card.status == CardStatus.active.value)).scalars()
        return {c.key: c.value for c in cards if c.provenance.get("producer") == "facts-llm"}


def test_an_answer_citing_a_turn_it_was_not_shown_gets_the_repair_prompt(engine) -> None:
    _ingest(engine)
    answers = [UNSEEN_TURN, GOOD]
    with ScriptedLLM(lambda body, n: Reply(answers[min(n, 2) - 1])) as server:
        report = extract_facts(engine=engine, llm=_extractor(engine, server))
        assert len(server.requests) == 2  # the answer, then one repair prompt naming the slip
        assert "Z9:9" in server.requests[1]["messages"][-1]["content"]
    assert report.llm_invalid == 0 and report.llm_failed == []
    assert _llm_facts(engine) == {"dev.job": "paramedic"}
    assert MARKER in _row(engine).extra and list_dead_letters(engine=engine) == []


@pytest.mark.parametrize("content", UNPARSABLE)
def test_an_answer_still_unparsable_is_parked_listed_and_redriven(engine, content) -> None:
    key = _ingest(engine)
    with ScriptedLLM(lambda body, n: Reply(content)) as server:
        report = extract_facts(engine=engine, llm=_extractor(engine, server), run_id="run-1")
        assert len(server.requests) == 2  # one repair prompt, no retry (as in retrospection)
        assert report.llm_invalid == 1 and report.new >= 0
        assert [f.split(": ")[0] for f in report.llm_failed] == [key]
        # not done: parked where an operator looks for dead letters
        row = _row(engine)
        assert MARKER not in row.extra
        assert row.extra[FACTS_DEAD_LETTER]["run"] == "run-1"
        assert [r.key for r in list_dead_letters(engine=engine)] == [key]
        assert [r.key for r in list_dead_letters(engine=engine, run_id="run-1")] == [key]
        assert list_dead_letters(engine=engine, run_id="run-2") == []
        assert list_dead_letters(engine=engine, namespace="other") == []
        assert dead_letter_error(row).startswith("facts: LLMOutputInvalid")
        assert "not retried" in dead_letter_error(row)
        assert row.status == "pending"  # its retrospection is not touched
        # a parked run waits for a re-drive: the next run does not ask again
        again = extract_facts(engine=engine, llm=_extractor(engine, server), run_id="run-2")
        assert again.trajectories == 0 and len(server.requests) == 2
        assert _llm_facts(engine) == {}
        assert redrive(engine=engine, ids=[key], namespace="other") == 0
        assert redrive(engine=engine, ids=[key]) == 1
        assert list_dead_letters(engine=engine) == []
        server.responder = lambda body, n: Reply(GOOD)
        back = extract_facts(engine=engine, llm=_extractor(engine, server))
    assert back.trajectories == 1 and back.llm_failed == []
    assert _llm_facts(engine) == {"dev.job": "paramedic"}
    row = _row(engine)
    assert MARKER in row.extra and FACTS_DEAD_LETTER not in row.extra


def test_an_answer_wrong_by_content_is_a_rejection_not_a_dead_letter(engine) -> None:
    """Well-formed, but citing a turn it was not shown, twice: asking again gets the same
    answer, so the run is done (its rule facts stand), the answer kept with its reason."""
    key = _ingest(engine)
    with ScriptedLLM(lambda body, n: Reply(UNSEEN_TURN)) as server:
        report = extract_facts(engine=engine, llm=_extractor(engine, server), run_id="run-1")
        assert len(server.requests) == 2  # the answer and its one repair prompt
        assert report.llm_failed == [] and len(report.llm_rejected) == 1
        assert report.llm_rejected[0].startswith(f"{key}: ") and "Z9:9" in report.llm_rejected[0]
        row = _row(engine)
        assert MARKER in row.extra and FACTS_DEAD_LETTER not in row.extra
        assert list_dead_letters(engine=engine) == []
        [rejected] = list_rejections(engine=engine, run_id="run-1")
        assert (rejected.key, rejected.part, rejected.run) == (key, "facts", "run-1")
        assert "Z9:9" in rejected.reason and json.loads(rejected.raw) == json.loads(UNSEEN_TURN)
        assert list_rejections(engine=engine, run_id="run-2") == []
        # nothing to re-drive, and the next run does not ask again
        assert redrive(engine=engine, ids=None) == 0
        again = extract_facts(engine=engine, llm=_extractor(engine, server), run_id="run-2")
        assert again.trajectories == 0 and len(server.requests) == 2
    assert REJECTED in _row(engine).extra


def test_the_cli_lists_rejected_answers_apart_from_dead_letters(engine, env_for) -> None:
    key = _ingest(engine)
    with ScriptedLLM(lambda body, n: Reply(UNSEEN_TURN)) as server:
        extract_facts(engine=engine, llm=_extractor(engine, server), run_id="run-1")
    listed = json.loads(hindsight(env_for, "dead-letters", "rejected", "-f", "json").stdout)
    assert [(x["key"], x["part"]) for x in listed] == [(key, "facts")]
    assert "Z9:9" in listed[0]["reason"] and "Z9:9" in listed[0]["raw"]
    assert json.loads(hindsight(env_for, "dead-letters", "list", "-f", "json").stdout) == []
    shown = hindsight(env_for, "dead-letters", "rejected").stdout
    assert "rejections: 1" in shown


@pytest.mark.parametrize(
    "reply,error",
    [
        (Reply(status=500, error="model crashed"), "LLMTransient"),
        (Reply(status=401, error="bad key"), "LLMRefused"),
    ],
)
def test_an_outage_is_retried_then_parked_and_redriven_by_run(engine, reply, error) -> None:
    key = _ingest(engine)
    with ScriptedLLM(lambda body, n: reply) as server:
        report = extract_facts(
            engine=engine, llm=_extractor(engine, server), run_id="run-1", retry_delays_s=[0.01]
        )
        tries = 2 if error == "LLMTransient" else 1
        assert len(server.requests) == tries
    assert report.llm_failed and error in report.llm_failed[0]
    [row] = list_dead_letters(engine=engine, run_id="run-1")
    assert row.key == key and dead_letter_error(row).startswith(f"facts: {error}")
    if error == "LLMTransient":
        assert "after 2 tries" in dead_letter_error(row)
    assert redrive(engine=engine, ids=None, run_id="run-2") == 0
    assert redrive(engine=engine, ids=None, run_id="run-1") == 1
    assert list_dead_letters(engine=engine) == []


def test_the_cli_lists_and_redrives_parked_facts(engine, env_for) -> None:
    key = _ingest(engine)
    with ScriptedLLM(lambda body, n: Reply("not json at all")) as server:
        extract_facts(engine=engine, llm=_extractor(engine, server))
    listed = json.loads(hindsight(env_for, "dead-letters", "list", "-f", "json").stdout)
    assert [(d["key"], d["parts"]) for d in listed] == [(key, ["facts"])]
    assert listed[0]["error"].startswith("facts: LLMOutputInvalid")
    assert "1 dead letter(s) back" in hindsight(env_for, "dead-letters", "redrive").stdout
    assert json.loads(hindsight(env_for, "dead-letters", "list", "-f", "json").stdout) == []


def test_the_nightly_names_parked_facts_and_its_retry_recovers_them(
    llm_env, engine, monkeypatch
) -> None:
    bad = [True]

    def respond(body, n):
        if "durable facts" in body["messages"][0]["content"]:
            return Reply("no facts here, sorry" if bad[0] else GOOD)
        return fake_model.respond(body, n)

    llm_env(respond)
    key = _ingest(engine, namespace="default")
    state = nightly(NightlyParams(), return_state=True)
    summary = run_summary(state)
    run = str(state.state_details.flow_run_id)
    assert summary.outcome.failures == []
    [named] = summary.outcome.dead_letters
    assert named.startswith(f"{key}: facts: LLMOutputInvalid")
    assert state.is_failed()
    assert state.message == "1 dead letter: retry this run to re-drive them"
    assert [r.key for r in list_dead_letters(engine=engine, run_id=run)] == [key]
    assert _llm_facts(engine) == {}
    # the LLM answers well again; the operator presses Retry: the same flow run, run_count 2
    bad[0] = False
    monkeypatch.setenv("PREFECT__RUNTIME__FLOW_RUN__ID", run)
    monkeypatch.setenv("PREFECT__RUNTIME__FLOW_RUN__RUN_COUNT", "2")
    retried = nightly(NightlyParams(), return_state=True)
    again = run_summary(retried)
    assert again.outcome.redriven == 1 and again.outcome.recovered == 1
    assert again.outcome.dead_letters == [] and retried.is_completed(), retried.message
    assert retried.message == "all stages ran; recovered 1 dead letters"
    assert _llm_facts(engine) == {"dev.job": "paramedic"}
    assert list_dead_letters(engine=engine) == []


def test_a_night_whose_only_problems_are_rejected_answers_ends_completed(
    llm_env, engine, monkeypatch
) -> None:
    def respond(body, n):
        if "durable facts" in body["messages"][0]["content"]:
            return Reply(UNSEEN_TURN)  # well-formed, wrong by content, every time
        return fake_model.respond(body, n)

    llm_env(respond)
    key = _ingest(engine, namespace="default")
    state = nightly(NightlyParams(), return_state=True)
    summary = run_summary(state)
    assert state.is_completed(), state.message
    assert summary.outcome.dead_letters == [] and summary.outcome.failures == []
    [rejected] = summary.outcome.rejections
    assert rejected.startswith(f"{key} (facts): ") and "Z9:9" in rejected
    assert summary.facts.llm_rejected and list_dead_letters(engine=engine) == []
    # its Retry (or the next night) re-drives nothing and counts nothing twice
    run = str(state.state_details.flow_run_id)
    monkeypatch.setenv("PREFECT__RUNTIME__FLOW_RUN__ID", run)
    monkeypatch.setenv("PREFECT__RUNTIME__FLOW_RUN__RUN_COUNT", "2")
    retried = nightly(NightlyParams(), return_state=True)
    again = run_summary(retried)
    assert retried.is_completed() and again.outcome.redriven == 0
    assert again.outcome.rejections == summary.outcome.rejections


def test_an_outage_stops_asking_after_a_few_runs_and_parks_the_rest(engine) -> None:
    """With the LLM down, each run would pay its timeouts and back-offs (2+8+30 s by default):
    after 3 runs in a row fail, the rest are parked without a call and wait for the Retry."""
    for i in range(6):
        doc = {
            "conversation": {
                "session_1_date_time": "9 June, 2024",
                "session_1": [
                    {"speaker": "Dev", "dia_id": "S1:0", "text": f"Long shift number {i} again."}
                ],
            }
        }
        ingest(
            engine=engine,
            records=read_records(json.dumps(doc), name=f"t{i}"),
            namespace="ns",
            task_type="chat",
        )
    with ScriptedLLM(lambda body, n: Reply(status=500, error="model crashed")) as server:
        report = extract_facts(
            engine=engine, llm=_extractor(engine, server), run_id="run-1", retry_delays_s=[0.01]
        )
        assert len(server.requests) == 3 * 2  # three runs, two tries each; then no call
    assert len(report.llm_failed) == 6
    assert sum("not asked" in f for f in report.llm_failed) == 3
    assert len(list_dead_letters(engine=engine, run_id="run-1")) == 6
    assert redrive(engine=engine, ids=None, run_id="run-1") == 6
