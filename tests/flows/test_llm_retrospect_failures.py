"""LLM retrospection when the server fails: retries, dead letters, permanent errors, stalls,
empty answers and the token budget, against a scripted OpenAI-compatible server."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from flows.params import RetrospectParams
from flows.retrospect import retrospect
from flows.stages import run_summary
from memory_core.models.trajectory import Trajectory
from memory_core.status import trajectory_counts
from tests.helpers import fake_model
from tests.helpers.flows import (
    failed_task_runs,
    ingest_examples,
    ingest_lines,
    run_retrospect,
)
from tests.helpers.scripted_llm import Reply


def test_transient_errors_are_retried_then_succeed(llm_env, engine) -> None:
    seen: dict[str, int] = {}

    def flaky(body, n):
        if fake_model.prompt_kind(body) == "cards":
            return fake_model.respond(body, n)
        key = body["messages"][1]["content"]
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 1:
            return Reply(status=429, error="slow down")
        if seen[key] == 2:
            return Reply(status=503, error="busy")
        return fake_model.respond(body, n)

    llm_env(flaky)
    ingest_examples(engine)
    summary = run_retrospect()
    assert summary.dead_letters == 0 and summary.trajectories == 12
    assert all(v == 3 for v in seen.values())


def test_what_still_fails_becomes_a_dead_letter_then_redrives(llm_env, engine, env_for) -> None:
    server = llm_env(lambda body, n: Reply(status=500, error="model crashed"))
    ingest_examples(engine)
    state = retrospect(RetrospectParams(), return_state=True)
    summary = run_summary(state)
    assert summary.dead_letters == 12 and summary.cards_created == 0
    assert state.is_failed() and state.message == "12 dead letters: retry this run to re-drive them"
    assert len(server.requests) == 12 * 4  # one try and three retries each
    with Session(engine) as s:
        rows = s.execute(select(Trajectory)).scalars().all()
    assert all(r.status == "dead_letter" and "after 4 tries" in r.error for r in rows)
    assert all("500" in r.error for r in rows)
    failed = failed_task_runs(state.state_details.flow_run_id, expect=12)
    assert len(failed) == 12 and all(t.name.startswith("llm-extract ") for t in failed)

    from memory_core.retrospect.dead_letters import list_dead_letters, redrive

    listed = list_dead_letters(engine=engine)
    assert len(listed) == 12 and listed[0].attempts == 1
    assert redrive(engine=engine, ids=[listed[0].key]) == 1
    server.responder = fake_model.respond
    again = run_retrospect()
    assert again.trajectories == 1 and again.dead_letters == 0
    assert redrive(engine=engine, ids=None) == 11
    assert run_retrospect().trajectories == 11
    assert trajectory_counts(engine=engine) == {"done": 12}


@pytest.mark.parametrize(
    "reply,reason",
    [
        (Reply(status=401, error="bad key"), "LLMRefused"),
        (Reply(status=400, error="context too long"), "LLMRefused"),
        (Reply("this is not json at all"), "LLMOutputInvalid"),
    ],
)
def test_permanent_errors_are_not_retried(llm_env, engine, reply, reason) -> None:
    server = llm_env(lambda body, n: reply)
    ingest_lines(
        engine,
        [
            {
                "id": "one",
                "steps": [{"type": "tool_call", "tool": "fetch", "error": "HTTP 503 busy"}],
            }
        ],
    )
    summary = run_retrospect()
    assert summary.dead_letters == 1
    expected_calls = 2 if reason == "LLMOutputInvalid" else 1  # one repair prompt, no retry
    assert len(server.requests) == expected_calls
    with Session(engine) as s:
        row = s.execute(select(Trajectory)).scalar_one()
    assert row.error.startswith(f"LLM part: {reason}") and "not retried" in row.error


def test_a_stalled_server_times_out_and_never_hangs(llm_env, engine) -> None:
    llm_env(lambda body, n: Reply("{}", delay_s=90), llm__timeout_s="0.5")
    ingest_lines(
        engine,
        [
            {
                "id": "one",
                "steps": [{"type": "tool_call", "tool": "fetch", "error": "HTTP 503 busy"}],
            }
        ],
    )
    start = time.monotonic()
    summary = run_retrospect()
    assert time.monotonic() - start < 30
    assert summary.dead_letters == 1
    with Session(engine) as s:
        assert "Timeout" in s.execute(select(Trajectory.error)).scalar_one()


def test_an_empty_answer_means_no_card_and_no_second_call(llm_env, engine) -> None:
    server = llm_env(lambda body, n: Reply('{"points": []}'))
    ingest_examples(engine)
    summary = run_retrospect()
    assert summary.trajectories == 12 and summary.cards_created == 0
    assert len(server.requests) == 12 and trajectory_counts(engine=engine) == {"done": 12}


def test_the_token_budget_defers_the_rest(llm_env, engine) -> None:
    llm_env(llm__token_budget="9000", retrospect__batch_size="4")
    ingest_examples(engine)
    summary = run_retrospect()
    assert summary.budget_exhausted and summary.deferred > 0
    assert 0 < summary.trajectories < 12
    counts = trajectory_counts(engine=engine)
    assert counts["pending"] == 12 - summary.trajectories and "processing" not in counts
    with Session(engine) as s:
        assert (
            s.execute(
                select(func.max(Trajectory.attempts)).where(Trajectory.status == "pending")
            ).scalar_one()
            == 0
        )
