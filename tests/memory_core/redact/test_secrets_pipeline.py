"""Secrets in runs and conversations: the raw run keeps them, nothing derived or served does."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlmodel import Session

from memory_core.facts.search import search_facts
from memory_core.facts.stage import extract_facts
from memory_core.ingest.store import ingest, read_records
from memory_core.models.card import Card, CardEvidence, CardVersion
from memory_core.models.trajectory import Trajectory
from memory_core.serve.keys import create_key
from memory_core.serve.schemas import QueryRequest
from memory_core.serve.service import MemoryService
from tests.helpers.pipeline import retrospect_all
from tests.helpers.serve import add_card

PASSWORD = "Tr0ub4dor&3xyz"
DB_PASS = "Zr9kd77Q"
OPENAI = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0"
SECRETS = (PASSWORD, DB_PASS, OPENAI, JWT)

RUN = {
    "id": "run-with-secrets",
    "task_type": "login_task",
    "outcome": "success",
    "steps": [
        {
            "type": "tool_call",
            "tool": "connect_db",
            "args": {"dsn": f"postgres://app:{DB_PASS}@db.internal:5432/prod", "key": OPENAI},
            "error": f"auth failed for postgres://app:{DB_PASS}@db.internal/prod with {OPENAI}",
        },
        {
            "type": "tool_call",
            "tool": "connect_db",
            "args": {"dsn": "postgres://app@db.internal:5432/prod", "token": JWT},
            "observation": f"connected; session {JWT}",
        },
        {"type": "tool_call", "tool": "fetch_orders", "args": {}, "observation": "3 orders"},
    ],
}
CONVERSATION = {
    "conversation": {
        "session_1_date_time": "10:00 am on 9 June, 2024",
        "session_1": [
            {"speaker": "Mia", "dia_id": "D1:1", "text": f"my favourite password is {PASSWORD}"},
            {"speaker": "Mia", "dia_id": "D1:2", "text": "I live in Lisbon"},
        ],
    }
}


def _all_derived_text(engine) -> str:
    with Session(engine) as s:
        cards = [c.model_dump(mode="json") for c in s.execute(select(Card)).scalars()]
        ev = [e.model_dump(mode="json") for e in s.execute(select(CardEvidence)).scalars()]
        hist = [v.model_dump(mode="json") for v in s.execute(select(CardVersion)).scalars()]
    return json.dumps([cards, ev, hist])


def test_nothing_derived_carries_a_secret_and_the_raw_run_is_kept(engine) -> None:
    for doc in (RUN, CONVERSATION):
        report = ingest(
            engine=engine,
            records=read_records(json.dumps(doc), name="t"),
            namespace="ns",
            task_type="default",
        )
        assert report.stored == 1, report.refused
    result = retrospect_all(engine)
    assert result.cards_created >= 1  # the run still teaches its lesson
    facts = extract_facts(engine=engine, namespace="ns")
    assert facts.refused >= 1  # "favourite password = <redacted>" is no fact
    derived = _all_derived_text(engine)
    assert "Lisbon" in derived and "[REDACTED:" in derived
    for secret in SECRETS:
        assert secret not in derived, secret
    with Session(engine) as s:
        raw = json.dumps([t.steps for t in s.execute(select(Trajectory)).scalars()])
    assert all(secret in raw for secret in SECRETS)  # stored as submitted
    # claims too: what a person said is served on request, and must be redacted then as well
    hits = search_facts(
        engine=engine, namespace="ns", text="password", top_k=10, include_claims=True
    )
    assert all(PASSWORD not in h.model_dump_json() for h in hits)


def test_served_answers_are_redacted_even_for_an_old_card(settings, engine) -> None:
    # a card written before redaction existed (straight into the table)
    card = add_card(
        engine,
        namespace="ns",
        scenario=f"login with password is {PASSWORD}",
        preconditions=[],
        modes=[{"mode": f"401 with {OPENAI}", "handling": f"use Bearer {JWT}"}],
    )
    _, secret = create_key(engine=engine, namespace="ns", scopes=["read"])
    svc = MemoryService(engine=engine, settings=settings)
    svc.start()
    try:
        who = svc.authenticate(secret)
        req = QueryRequest(task_state={}, prompt_tokens=400)
        served = [
            svc.query(principal=who, request=req).model_dump_json(),
            svc.query_json(principal=who, request=QueryRequest(task_state={})).decode(),
            svc.get_card(principal=who, card_id=card.card_id).model_dump_json(),
            json.dumps(
                [
                    h.model_dump(mode="json")
                    for h in svc.history(principal=who, card_id=card.card_id)
                ]
            ),
        ]
    finally:
        svc.close()
    assert all("[REDACTED:" in s for s in served[:3])
    for text in served:
        for secret in (PASSWORD, OPENAI, JWT):
            assert secret not in text


# the kinds that once went to the LLM in clear, each as a general rule covers it
EIGHT = {
    "url": ("redis://:Vq7Lm2Pz9x@cache:6379/0", "Vq7Lm2Pz9x"),
    "mysql": ("mysql -u root -pPlum7Tree44 shop", "Plum7Tree44"),
    "cookie": ("Cookie: sessionid=a81f2c9e7d3b55aa", "a81f2c9e7d3b55aa"),
    "twilio": (
        "twilio auth token 5f0c1e9a7b3d2c4e6f8a0b1c2d3e4f5a",
        "5f0c1e9a7b3d2c4e6f8a0b1c2d3e4f5a",
    ),
    "discord": (
        "bot MTI3NjU0MzIxMDk4NzY1NDMyMQ.Gh7kLm.Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7",
        "MTI3NjU0MzIxMDk4NzY1NDMyMQ.Gh7kLm.Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7",
    ),
    "shopify": ("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", "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"),
    "sshpass": ("sshpass -p 'Lime 42 cactus' ssh deploy@10.0.0.4", "Lime 42 cactus"),
    "prose": ("Mein Passwort lautet Sommer2024Wald", "Sommer2024Wald"),
}


def _echo(body, _n):
    """A model that copies its prompt into its cards (what reaches a prompt reaches a card)."""
    from tests.helpers import fake_model
    from tests.helpers.scripted_llm import Reply

    if fake_model.prompt_kind(body) == "decision_points":
        return Reply(json.dumps(fake_model.obedient_points(body, at_first_call=True)))
    text = body["messages"][1]["content"][:900]
    card = {
        "point": 0,
        "scenario": text,
        "preconditions": ['tool == "shell"', f"args.cmd == {json.dumps(text[:200])}"],
        "action_sequence": [{"tool": "shell", "params_template": {"cmd": text}, "note": text}],
        "expected_outcome": text,
        "actual_outcome": text,
        "failure_modes": [{"mode": text, "handling": text}],
        "confidence": 0.9,
    }
    return Reply(json.dumps({"cards": [card]}))


def test_no_prompt_and_no_llm_card_rejected_or_not_carries_a_secret(engine) -> None:
    from datetime import timedelta

    from memory_core.retrospect.claims import worker_id
    from memory_core.retrospect.factory import build_extractor
    from memory_core.retrospect.stage import retrospect_once
    from memory_core.settings import Settings
    from memory_core.validate.stage import validate_drafts
    from tests.helpers.scripted_llm import ScriptedLLM

    steps = [
        {"type": "tool_call", "tool": "shell", "args": {"cmd": text}, "error": f"failed: {text}"}
        for text, _ in EIGHT.values()
    ]
    run = {"id": "eight", "outcome": "failure", "steps": steps}
    ingest(engine=engine, records=[("eight", run)], namespace="ns", task_type="ops")
    with ScriptedLLM(_echo) as llm:
        settings = Settings(
            embedding={"provider": "none"},
            llm={"base_url": llm.url, "model": "scripted-1", "retry_delays_s": [0.05]},
        )
        extractor = build_extractor(settings, engine)
        claimed = retrospect_once(
            engine=engine,
            extractor=extractor,
            worker=worker_id(),
            batch_size=10,
            lease=timedelta(seconds=60),
        ).claimed
        prompts = json.dumps(llm.requests, ensure_ascii=False)
    assert claimed == 1 and len(llm.requests) >= 2
    validate_drafts(engine=engine, reports_dir=None, namespace="ns")
    derived = _all_derived_text(engine)
    with Session(engine) as s:
        statuses = {c.status for c in s.execute(select(Card)).scalars()}
    assert statuses and "[REDACTED:" in prompts and "[REDACTED:" in derived, statuses
    for name, (_, secret) in EIGHT.items():
        assert secret not in prompts, name
        assert secret not in derived, name
