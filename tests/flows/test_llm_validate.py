"""LLM drafts that fail validation get one regeneration attempt, then are rejected."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlmodel import Session

from flows.nightly import nightly
from flows.params import NightlyParams
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardVersion
from tests.helpers import fake_model
from tests.helpers.scripted_llm import Reply, ScriptedLLM

LEAKY = "rotate the key sk-live0123456789abcdefXYZ then retry"


def responder(*, fix: bool):
    def respond(body, n):
        kind = fake_model.prompt_kind(body)
        if kind == "cards":
            out = fake_model.cards(body)
            out["cards"][0]["failure_modes"][0]["handling"] = LEAKY
            return Reply(json.dumps(out))
        if kind == "regenerate":
            card = json.loads(
                body["messages"][1]["content"]
                .split("The card:\n", 1)[1]
                .split("\n\nIt failed", 1)[0]
            )
            if fix:
                card["failure_modes"][0]["handling"] = "rotate the key, then retry"
            return Reply(json.dumps(card))
        return fake_model.respond(body, n)

    return respond


@pytest.mark.parametrize("fix", [True, False])
def test_one_regeneration_then_active_or_rejected(flow_env, engine, monkeypatch, fix) -> None:
    # what validation decides, not the serving gate after it (one run is one task group)
    monkeypatch.setenv("HINDSIGHT_GATE__ENABLED", "false")
    with ScriptedLLM(responder(fix=fix)) as server:
        for k, v in {"BASE_URL": server.url, "MODEL": "scripted-1", "MODE": "instead"}.items():
            monkeypatch.setenv(f"HINDSIGHT_LLM__{k}", v)
        ingest(
            engine=engine,
            records=iter(
                [
                    (
                        "r",
                        {
                            "id": "leak",
                            "steps": [
                                {
                                    "type": "tool_call",
                                    "tool": "vault_read",
                                    "error": "HTTP 401 expired key",
                                }
                            ],
                        },
                    )
                ]
            ),
            namespace="default",
            task_type="default",
        )
        summary = nightly(NightlyParams())
        # the leaked key is redacted when the draft is written (memory_core.redact), so the
        # "no secrets" expectation never fails and nothing needs regenerating
        assert server.calls("[prompt: regenerate") == 0
    with Session(engine) as s:
        [card] = s.execute(select(Card)).scalars().all()
        reasons = [
            v.reason
            for v in s.execute(
                select(CardVersion)
                .where(CardVersion.card_id == card.card_id)
                .order_by(CardVersion.version)
            ).scalars()
        ]
    assert card.status == "active" and summary.validation.activated == 1
    assert LEAKY not in json.dumps(card.failure_modes)
    assert "[REDACTED:" in json.dumps(card.failure_modes)
    assert reasons[0] == "created by retrospection"  # then the validator's version, no other
    assert len(reasons) == 2 and reasons[1].startswith("passed validation"), reasons
