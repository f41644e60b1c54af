"""Keyed endpoints: the LLM and embeddings keys reach the server as given (a SecretStr dumps
as '**********'; caches built from a dump sent that literal), through the nightly flow."""

from __future__ import annotations

import json

from prefect.client.orchestration import get_client
from sqlalchemy import select
from sqlmodel import Session

from flows.nightly import nightly
from flows.params import NightlyParams
from flows.stages import run_summary
from memory_core.models.card import Card
from memory_core.settings import Settings
from memory_core.status import trajectory_counts
from tests.helpers import fake_model
from tests.helpers.data import REPO
from tests.helpers.scripted_llm import Reply, ScriptedLLM

KEY = "sk-night-0123456789abcdef"


def _respond(body, n):
    if "durable facts" in body["messages"][0]["content"]:
        return Reply(json.dumps({"facts": []}))
    return fake_model.respond(body, n)


def _keyed(llm_key: str) -> Settings:
    return Settings(llm={"api_key": llm_key}, embedding={"api_key": "e1"}, qdrant={"api_key": "q1"})


def test_cache_key_tells_secrets_apart_without_holding_them() -> None:
    a = _keyed(KEY)
    b = _keyed(KEY + "x")
    assert a.cache_key() != b.cache_key()
    assert a.cache_key() == _keyed(KEY).cache_key()
    for s in (a, b):
        assert KEY not in s.cache_key() and "q1" not in s.cache_key()
        assert "**********" not in s.cache_key()
    assert "q1" not in repr(a)  # the Qdrant key is a secret too


def _keyed_nightly(flow_env, engine, monkeypatch, key: str) -> tuple[ScriptedLLM, object]:
    server = ScriptedLLM(_respond, api_key=KEY).__enter__()
    env = {
        "HINDSIGHT_LLM__BASE_URL": server.url,
        "HINDSIGHT_LLM__MODEL": "scripted-1",
        "HINDSIGHT_LLM__API_KEY": key,
        "HINDSIGHT_LLM__RETRY_DELAYS_S": "[0.05]",
        "HINDSIGHT_EMBEDDING__PROVIDER": "openai",
        "HINDSIGHT_EMBEDDING__BASE_URL": server.url,
        "HINDSIGHT_EMBEDDING__MODEL": "scripted-embed",
        "HINDSIGHT_EMBEDDING__API_KEY": key,
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    state = nightly(NightlyParams(input=[str(REPO / "examples")]), return_state=True)
    server.__exit__(None, None, None)
    return server, state


def test_keyed_endpoint_through_the_nightly_flow(flow_env, engine, monkeypatch) -> None:
    server, state = _keyed_nightly(flow_env, engine, monkeypatch, KEY)
    summary = run_summary(state)
    assert server.unauthorized == [], server.unauthorized[:3]
    assert state.is_completed(), state.message
    assert len(server.requests) > 0 and len(server.embed_requests) > 0  # chat and embeddings
    assert summary.outcome.dead_letters == [] and summary.retrospect.llm_calls > 0
    assert summary.consolidation.embedded > 0  # vectors came from the keyed endpoint
    with Session(engine) as s:
        producers = {c.provenance.get("producer") for c in s.execute(select(Card)).scalars()}
    assert "llm" in producers
    assert trajectory_counts(engine=engine) == {"done": 12}


def test_a_wrong_key_is_refused_and_named(flow_env, engine, monkeypatch) -> None:
    """The server really checks: a wrong key dead-letters the LLM part of every run."""
    server, state = _keyed_nightly(flow_env, engine, monkeypatch, "sk-wrong")
    assert server.unauthorized and state.is_failed()
    summary = run_summary(state)
    assert summary.outcome.dead_letters and all(
        "401" in d or "LLMRefused" in d for d in summary.outcome.dead_letters
    )
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
    assert run.state.is_failed() and " dead letters" in run.state.message
    assert run.state.message.endswith(": retry this run to re-drive them")
