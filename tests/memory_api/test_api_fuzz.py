"""Schema-driven fuzzing of the API on a real server, SQLite and PostgreSQL: whatever the input
(fitting the schema or not), no 5xx, and every answer is one the OpenAPI schema documents.
Bounded: HINDSIGHT_FUZZ_EXAMPLES examples per operation and mode."""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import status_code_conformance

from memory_api.app import create_app
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card

EXAMPLES = int(os.environ.get("HINDSIGHT_FUZZ_EXAMPLES", "8"))


@pytest.fixture
def served(settings, engine):
    """A live server over a namespace with a card, and a key with every scope."""
    add_card(engine, namespace="fuzz", scenario="search answers 429", preconditions=[])
    _, key = create_key(engine=engine, namespace="fuzz", scopes=["read", "write", "admin"])
    svc = MemoryService(engine=engine, settings=settings)
    with LiveServer(create_app(svc)) as server:
        yield server.url, key


# a stored card runs the validation suite (seconds on a busy machine): fewer examples there
SLOW = {("POST", "/v1/cards"): 3}


def _fuzzer(op: Any, mode: GenerationMode, url: str, headers: dict[str, str]) -> Any:
    @settings(
        max_examples=SLOW.get((op.method.upper(), op.path), EXAMPLES),
        deadline=None,
        derandomize=True,  # the same inputs every run: a failure reproduces
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        case = data.draw(op.as_strategy(generation_mode=mode))
        case.call_and_validate(
            base_url=url,
            headers=headers,
            checks=[not_a_server_error, status_code_conformance],
            timeout=120,
        )

    return fuzz


@pytest.mark.timeout(600)
def test_no_server_errors_and_every_answer_documented(served) -> None:
    url, key = served
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    headers = {"Authorization": f"Bearer {key}"}
    operations = [r.ok() for r in schema.get_all_operations()]
    # deleting the namespace takes the key with it: last, so every other operation has it
    operations.sort(key=lambda op: (op.method.upper(), op.path) == ("DELETE", "/v1/namespace"))
    assert len(operations) >= 15
    tried: list[str] = []
    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _fuzzer(op, mode, url, headers)()
            except Unsatisfiable:
                # no input can be made invalid (no parameters, no body): nothing to try
                assert mode is GenerationMode.NEGATIVE, op.path
                continue
            tried.append(f"{op.method.upper()} {op.path} {mode.value}")
    assert len(tried) >= 2 * len(operations) - 3, tried
