"""A query's and a check's JSON (memory_core/serve/answer.py) are what the models would write."""

from __future__ import annotations

import json

from memory_core.models.card import CardPublic
from memory_core.serve.answer import answer_json, card_hits, check_json, plain_json, warnings
from memory_core.serve.prompt_block import prompt_block
from memory_core.serve.schemas import (
    CheckActionRequest,
    CheckActionResult,
    QueryRequest,
    QueryResult,
    Score,
)
from memory_core.serve.service import MemoryService
from tests.helpers.serve import add_card, keys_for
from tests.memory_core.retrospect.test_reminder_profile import night


def test_the_plain_encoding_matches_the_models(settings, engine) -> None:
    for i in range(4):
        add_card(engine, scenario=f"card {i}", preconditions=['tool == "search"'], use_count=i)
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(keys_for(engine)["read"])
    request = QueryRequest(task_state={"tool": "search"}, query="card")
    answer = svc._retrieve(who, request, via="api")
    answer.hits[0].match.score.recency = float("inf")  # written as null either way
    modelled = QueryResult(cards=card_hits(answer.hits, explain=False), query_id=answer.query_id)
    plain, model = json.loads(plain_json(answer)), json.loads(modelled.model_dump_json())
    assert len(plain["cards"]) == 4 and plain == model
    assert plain["cards"][0]["score"]["recency"] is None
    assert list(plain["cards"][0]["score"]) == list(model["cards"][0]["score"])  # field order


def _store(engine) -> None:
    for i in range(4):
        add_card(engine, scenario=f"card {i}", preconditions=['tool == "search"'], use_count=i)
    add_card(engine, scenario="a near miss", preconditions=['tool == "search"', "retry_count > 2"])
    add_card(engine, scenario="another tool", preconditions=['tool == "fetch"'], tool="fetch")


def test_an_explained_answer_with_a_prompt_matches_the_models(settings, engine) -> None:
    _store(engine)
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(keys_for(engine)["read"])
    state = {"tool": "search", "retry_count": 1, "tol": "x"}  # `tol`: a variable no card reads
    for prompt_tokens in (None, 200):
        request = QueryRequest(
            task_state=state, query="card", explain=True, prompt_tokens=prompt_tokens
        )
        answer = svc._retrieve(who, request, via="api")
        answer.hits[0].match.score.recency = float("nan")  # written as null either way
        model = json.loads(svc.result(answer, request).model_dump_json())
        cards = [CardPublic.model_validate_json(h.card) for h in answer.hits]
        prompt = prompt_block(cards, max_tokens=prompt_tokens) if prompt_tokens else None
        direct = json.loads(answer_json(answer, explain=True, prompt=prompt))
        assert direct == model
        assert len(direct["cards"]) == 4 and direct["cards"][0]["checks"]
        assert direct["explain"]["near_misses"] and direct["explain"]["unread_variables"]
        assert (direct["prompt"] is None) == (prompt_tokens is None)
        assert list(direct) == list(model)  # field order, each level
        assert list(direct["explain"]) == list(model["explain"])
        miss, model_miss = direct["explain"]["near_misses"][0], model["explain"]["near_misses"][0]
        assert list(miss) == list(model_miss) and list(miss["score"]) == list(model_miss["score"])


def test_a_check_answer_matches_the_models(settings, engine) -> None:
    _store(engine)
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(keys_for(engine)["read"])
    request = CheckActionRequest(tool="search", args={"q": "x"}, task_state={"retry_count": 3})
    answer = svc._check(who, request, via="api")
    modelled = CheckActionResult(
        tool=request.tool,
        warnings=warnings(answer.hits, answer.retrieval.demoted),
        cards=card_hits(answer.hits, explain=False),
        query_id=answer.query_id,
    )
    direct, model = (
        json.loads(check_json(request.tool, answer)),
        json.loads(modelled.model_dump_json()),
    )
    assert len(direct["cards"]) == 5 and len(direct["warnings"]) == 5 and direct == model
    assert direct["warnings"][0] == {
        "card_id": direct["cards"][0]["card"]["card_id"],
        "confidence": 0.7,
        "mode": "rate limited",
        "handling": "back off",
        "scope": "tool",
    }


def test_a_demoted_reminder_is_written_as_the_models_write_it(settings, engine) -> None:
    night(engine)  # a tool's reminders with the kinds of call their errors came with
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(keys_for(engine, namespace="default")["read"])
    state = {"tool": "book", "args": {"cabin": "economy", "user": "user_5"}}
    request = QueryRequest(task_state=state, explain=True)
    answer = svc._retrieve(who, request, via="api")
    direct = json.loads(answer_json(answer, explain=True))
    assert direct == json.loads(svc.result(answer, request).model_dump_json())
    assert len(direct["explain"]["demoted"]) == 1
    check = CheckActionRequest(tool="book", args=state["args"])
    answer = svc._check(who, check, via="api")
    modelled = CheckActionResult(
        tool="book",
        warnings=warnings(answer.hits, answer.retrieval.demoted),
        cards=card_hits(answer.hits, explain=False),
        query_id=answer.query_id,
    )
    direct = json.loads(check_json("book", answer))
    assert direct == json.loads(modelled.model_dump_json())
    assert [w for w in direct["warnings"] if "demoted" in w]


def test_a_score_built_fast_is_what_model_construct_builds() -> None:
    terms = dict(
        confidence=0.5, recency=0.25, use_frequency=0.1, specificity=0.2, text_similarity=None
    )
    fast, slow = Score.of(*terms.values(), score=0.7), Score.model_construct(**terms, score=0.7)
    assert fast == slow and type(fast) is Score
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())  # plain_json's order
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json()
    fast.support = slow.support = 0.5  # retrieval sets it on the matches of a state
    assert fast == slow and fast.model_fields_set == slow.model_fields_set
    assert fast.model_fields_set is not Score.of(*terms.values(), score=0.7).model_fields_set
