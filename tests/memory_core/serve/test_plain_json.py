"""A plain query's JSON (memory_core/serve/answer.plain_json) is what the models would write."""

from __future__ import annotations

import json

from memory_core.serve.answer import card_hits, plain_json
from memory_core.serve.schemas import QueryRequest, QueryResult
from memory_core.serve.service import MemoryService
from tests.helpers.serve import add_card, keys_for


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
