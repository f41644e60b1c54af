"""Facts from conversations and trajectories: the stage, supersession, the LLM path, the CLI
(the rules alone: test_facts_rules.py)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlmodel import Session

from memory_core.facts.llm import LLMFactExtractor
from memory_core.facts.marks import MARKER
from memory_core.facts.search import search_facts
from memory_core.facts.stage import extract_facts
from memory_core.ingest.store import ingest, read_records
from memory_core.llm.cache import SQLAnswerCache
from memory_core.llm.client import OpenAICompatibleLLM
from memory_core.models.card import Card, CardStatus
from memory_core.models.llm_answer import LLMAnswer
from memory_core.models.trajectory import Trajectory
from tests.helpers.scripted_llm import Reply, ScriptedLLM


def _ingest(engine, doc, namespace: str = "ns"):
    report = ingest(
        engine=engine,
        records=read_records(json.dumps(doc), name="t"),
        namespace=namespace,
        task_type="chat",
    )
    assert report.refused == [], report.refused
    return report


def _conversation(*sessions: tuple[str, list[tuple[str, str]]]) -> dict:
    conv: dict = {}
    for n, (date, turns) in enumerate(sessions, start=1):
        conv[f"session_{n}_date_time"] = date
        conv[f"session_{n}"] = [
            {"speaker": who, "dia_id": f"S{n}:{i}", "text": text}
            for i, (who, text) in enumerate(turns)
        ]
    return {"conversation": conv}


def _active(engine, namespace: str = "ns") -> dict[str, str]:
    with Session(engine) as s:
        cards = s.execute(
            select(Card).where(Card.namespace == namespace, Card.status == CardStatus.active.value)
        ).scalars()
        return {c.key: c.value for c in cards}


def test_newest_statement_supersedes_and_the_stage_is_idempotent(engine) -> None:
    # sessions given out of order: the dates decide what is newest
    _ingest(
        engine,
        _conversation(
            (
                "10:00 am on 9 June, 2024",
                [("Dev", "We use PostgreSQL, not MySQL."), ("Kim", "Cool.")],
            ),
            (
                "9:00 am on 2 May, 2024",
                [("Dev", "We use MySQL. I live in Oslo."), ("Kim", "Nice!")],
            ),
        ),
    )
    first = extract_facts(engine=engine)
    assert first.trajectories == 1 and first.superseded == 1
    assert _active(engine) == {
        "dev.group.uses.mysql": "no (PostgreSQL instead)",
        "dev.group.uses.postgresql": "yes (PostgreSQL, not MySQL)",
        "dev.lives_in": "Oslo",
    }
    # what a speaker says of themselves is their claim: searched on request
    assert search_facts(engine=engine, namespace="ns", text="MySQL") == []
    hits = search_facts(
        engine=engine, namespace="ns", text="MySQL", include_superseded=True, include_claims=True
    )
    assert {h.fact.value for h in hits} >= {"yes (MySQL)", "no (PostgreSQL instead)"}
    mysql = next(h.fact for h in hits if h.fact.value == "yes (MySQL)")
    assert mysql.status == "superseded"
    source = next(h.fact for h in hits if h.fact.status == "active").provenance["source"]
    assert source["turn_id"] == "S1:0" and source["said_at"].startswith("2024-06-09")
    with Session(engine) as s:
        (row,) = s.execute(select(Trajectory)).scalars()
        assert row.extra[MARKER]["version"] == "rules.v1"
        cards = len(s.execute(select(Card)).all())
    again = extract_facts(engine=engine)
    assert (again.trajectories, again.found, again.new) == (0, 0, 0)
    with Session(engine) as s:
        assert len(s.execute(select(Card)).all()) == cards


def test_an_older_statement_arriving_later_does_not_supersede(engine) -> None:
    _ingest(engine, _conversation(("9 June, 2024", [("Dev", "I live in Oslo.")])))
    extract_facts(engine=engine)
    _ingest(engine, _conversation(("2 May, 2024", [("Dev", "I live in Rome.")])))
    report = extract_facts(engine=engine)
    assert report.skipped_older == 1 and _active(engine) == {"dev.lives_in": "Oslo"}


def test_trajectory_messages_of_the_user_only(engine) -> None:
    run = {
        "messages": [
            {"role": "system", "content": "I am a helpful assistant. Call me Botty."},
            {"role": "user", "content": "We use Terraform. I prefer YAML over JSON."},
            {
                "role": "assistant",
                "content": "I'm an agent. I live in Frankfurt.",
                "tool_calls": [{"id": "c1", "function": {"name": "plan", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "I live in Paris"},
        ]
    }
    _ingest(engine, run)
    report = extract_facts(engine=engine, namespace="ns")
    assert report.statements == 1
    # a run that names nobody: its user is its own subject, never the namespace's "user"
    facts = _active(engine)
    (subject,) = {k.split(".")[0] for k in facts}
    assert subject.startswith("user@") and facts == {
        f"{subject}.group.uses.terraform": "yes (Terraform)",
        f"{subject}.prefers.json_or_yaml": "YAML",
    }


def _llm_setup(engine, server):
    llm = OpenAICompatibleLLM(base_url=server.url, model="scripted-1", api_key=None)
    return LLMFactExtractor(llm=llm, cache=SQLAnswerCache(engine))


def test_llm_facts_are_written_with_their_turn_and_cached(engine) -> None:
    answer = {
        "facts": [
            {
                "subject": "Dev",
                "attribute": "job",
                "value": "paramedic",
                "question": "What is Dev's job?",
                "turn": "S1:1",
                "valid_until": None,
                "confidence": 0.9,
            }
        ]
    }
    _ingest(
        engine,
        _conversation(
            ("9 June, 2024", [("Kim", "Hi"), ("Dev", "Long shift on the ambulance again.")])
        ),
    )
    with ScriptedLLM(lambda body, n: Reply(json.dumps(answer))) as server:
        report = extract_facts(engine=engine, llm=_llm_setup(engine, server))
        assert server.calls("durable facts") == 1
        assert "[S1:1] (2024-06-09) Dev: Long shift" in server.requests[0]["messages"][1]["content"]
    assert report.llm_calls == 1 and report.llm_invalid == 0
    assert _active(engine) == {"dev.job": "paramedic"}
    with Session(engine) as s:
        card = s.execute(select(Card)).scalar_one()
        assert card.provenance["producer"] == "facts-llm"
        assert card.provenance["source"]["turn_id"] == "S1:1"
        cached = s.execute(select(LLMAnswer)).scalar_one()
        (row,) = s.execute(select(Trajectory)).scalars()
        # the answer carries the namespace of the run it was about
        assert cached.prompt_id == "facts.v1" and cached.namespace == row.namespace
        assert row.extra[MARKER]["version"] == "rules.v1+facts.v1"


@pytest.mark.parametrize(
    "content",
    [
        "I could not find anything durable, sorry!",
        json.dumps({"facts": [{"subject": "Dev", "value": "x"}]}),
        json.dumps(
            {
                "facts": [
                    {
                        "subject": "Dev",
                        "attribute": "job",
                        "value": "cook",
                        "question": "What is Dev's job?",
                        "turn": "Z9:9",
                    }
                ]
            }
        ),
    ],
)
def test_garbage_from_the_llm_writes_nothing(engine, content) -> None:
    _ingest(
        engine, _conversation(("9 June, 2024", [("Dev", "Long shift on the ambulance again.")]))
    )
    with ScriptedLLM(lambda body, n: Reply(content)) as server:
        report = extract_facts(engine=engine, llm=_llm_setup(engine, server))
    assert report.llm_invalid == 1 and report.new == 0
    assert _active(engine) == {}


def test_cli_add_search_forget_extract(env_for, tmp_path) -> None:
    from tests.helpers.cli import hindsight

    conv = tmp_path / "chat.json"
    conv.write_text(
        json.dumps(
            [
                {"speaker": "Dev", "text": "I live in Oslo.", "timestamp": "2024-05-02T09:00:00Z"},
                {"speaker": "Kim", "text": "Nice!"},
            ]
        )
    )
    assert json.loads(hindsight(env_for, "ingest", str(conv), "-f", "json").stdout)["stored"] == 1
    out = json.loads(hindsight(env_for, "facts", "extract", "-f", "json").stdout)
    assert (out["trajectories"], out["new"]) == (1, 1)
    again = json.loads(hindsight(env_for, "facts", "extract", "-f", "json").stdout)
    assert (again["trajectories"], again["new"]) == (0, 0)
    first = json.loads(
        hindsight(
            env_for,
            "facts",
            "add",
            "team.database",
            "PostgreSQL 15",
            "--query",
            "Which database does the team use?",
            "-f",
            "json",
        ).stdout
    )
    hindsight(
        env_for,
        "facts",
        "add",
        "team.database",
        "MySQL 8",
        "--query",
        "Which database does the team use?",
        "--valid-until",
        "2999-01-01",
    )
    hits = json.loads(hindsight(env_for, "facts", "search", "database", "-f", "json").stdout)
    assert [h["fact"]["value"] for h in hits] == ["MySQL 8"]
    assert hits[0]["fact"]["card_id"] != first["card_id"]
    every = json.loads(
        hindsight(env_for, "facts", "search", "database", "--all", "-f", "json").stdout
    )
    assert {h["fact"]["value"] for h in every} == {"MySQL 8", "PostgreSQL 15"}
    # Dev's word about Dev is a claim: searched only with --claims, and marked
    assert json.loads(hindsight(env_for, "facts", "search", "Oslo", "-f", "json").stdout) == []
    hidden = hindsight(env_for, "facts", "search", "Oslo")
    assert "1 claim(s)" in hidden.stderr and "--claims" in hidden.stderr
    where = json.loads(
        hindsight(
            env_for, "facts", "search", "Where does Dev live", "--claims", "-f", "json"
        ).stdout
    )
    assert where[0]["fact"]["value"] == "Oslo"
    assert (where[0]["fact"]["standing"], where[0]["fact"]["speaker"]) == ("claim", "Dev")
    table = hindsight(env_for, "facts", "search", "Oslo", "--claims").stdout
    assert "Oslo" in table and "dev.lives_in" in table and "claim of Dev" in table
    gone = json.loads(
        hindsight(env_for, "facts", "forget", where[0]["fact"]["card_id"], "-f", "json").stdout
    )
    assert gone["status"] == "forgotten"
    gone_too = hindsight(env_for, "facts", "search", "Oslo", "--claims", "-f", "json").stdout
    assert json.loads(gone_too) == []
    bad = hindsight(env_for, "facts", "add", "k", "v", "--valid-until", "soon", check=False)
    assert bad.returncode == 2 and "valid_until" in bad.stderr
    missing = hindsight(env_for, "facts", "forget", "not-a-uuid", check=False)
    assert missing.returncode == 2
