"""The OpenAI-compatible client and structured answers, against a scripted HTTP server."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel

from memory_core.errors import LLMOutputInvalid, LLMRefused, LLMTransient
from memory_core.llm.client import OpenAICompatibleLLM
from memory_core.llm.structured import ask
from tests.helpers.scripted_llm import Reply, ScriptedLLM


class Points(BaseModel):
    points: list[int]


def _client(server: ScriptedLLM, **kw) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(base_url=server.url, model="scripted-1", api_key=None, **kw)


def ask_points(llm) -> Points:
    return ask(llm=llm, messages=[{"role": "user", "content": "go"}], schema=Points).value


def test_valid_answer_uses_json_schema() -> None:
    with ScriptedLLM(lambda body, n: Reply(json.dumps({"points": [1, 2]}))) as server:
        assert ask_points(_client(server)).points == [1, 2]
        assert server.requests[0]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("status", [400, 500])
def test_falls_back_to_json_mode_with_schema_and_remembers(status) -> None:
    with ScriptedLLM(
        lambda body, n: Reply('{"points": []}'), reject_json_schema=True, reject_status=status
    ) as server:
        llm = _client(server)
        assert ask_points(llm).points == []
        assert ask_points(llm).points == []
        kinds = [r["response_format"]["type"] for r in server.requests]
        assert kinds == ["json_schema", "json_object", "json_object"]
        assert "schema" in server.requests[1]["response_format"]


def test_broken_json_is_repaired_locally_without_a_second_call() -> None:
    with ScriptedLLM(lambda body, n: Reply('```json\n{"points": [3, 4],}\n```')) as server:
        result = ask(
            llm=_client(server), messages=[{"role": "user", "content": "x"}], schema=Points
        )
        assert result.value.points == [3, 4] and result.repaired_locally
        assert len(server.requests) == 1


def test_then_one_repair_prompt_then_give_up() -> None:
    answers = iter(['{"points": "many"}', '{"points": [5]}'])
    with ScriptedLLM(lambda body, n: Reply(next(answers))) as server:
        assert ask_points(_client(server)).points == [5]
        repair = server.requests[1]["messages"][-1]["content"]
        assert "could not be used" in repair and "points" in repair
    with ScriptedLLM(lambda body, n: Reply("I cannot help with that")) as server:
        with pytest.raises(LLMOutputInvalid) as err:
            ask_points(_client(server))
        assert len(server.requests) == 2 and "I cannot help" in err.value.raw


@pytest.mark.parametrize(
    "status,kind",
    [
        (429, LLMTransient),
        (500, LLMTransient),
        (503, LLMTransient),
        (401, LLMRefused),
        (404, LLMRefused),
        (422, LLMRefused),
    ],
)
def test_status_codes_map_to_transient_or_refused(status, kind) -> None:
    with ScriptedLLM(lambda body, n: Reply(status=status)) as server:
        with pytest.raises(kind, match=str(status)):
            ask_points(_client(server))
        assert len(server.requests) == 1  # the client itself never retries


def test_a_stall_times_out_as_transient() -> None:
    with ScriptedLLM(lambda body, n: Reply("{}", delay_s=90)) as server:
        start = time.monotonic()
        with pytest.raises(LLMTransient, match="Timeout"):
            ask_points(_client(server, timeout_s=1.0))
        assert time.monotonic() - start < 5


def test_connection_refused_is_transient() -> None:
    llm = OpenAICompatibleLLM(base_url="http://127.0.0.1:9/v1", model="m", api_key=None)
    with pytest.raises(LLMTransient, match="Connection"):
        ask_points(llm)
