"""LLM card answers wrong by content on the retrospect side: a decision point citing a step
the model was not shown, a card built on a decision point it was not given. Against the
scripted OpenAI-compatible server: a rejection is counted, kept with its reason and raw answer,
the run is done (its rule-free LLM part taught nothing) and never parked; asking again the
same way says so and is still one rejection."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import update
from sqlmodel import col

from flows.params import RetrospectParams
from flows.retrospect import retrospect
from flows.stages import run_summary
from memory_core.db import session_scope
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect.dead_letters import list_dead_letters, list_rejections, redrive
from memory_core.retrospect.rejections import REPEAT_NOTE
from memory_core.status import trajectory_counts
from tests.helpers import fake_model
from tests.helpers.flows import ingest_examples, ingest_lines
from tests.helpers.scripted_llm import Reply

BAD = "the-run-answered-wrongly"
RUN = {
    "id": BAD,
    "steps": [
        {"type": "tool_call", "tool": "fetch", "args": {"q": BAD}, "error": "HTTP 503 busy"},
        {"type": "tool_call", "tool": "fetch", "args": {"q": BAD}, "observation": "ok"},
    ],
}


def _wrong_step(body: dict[str, Any], n: int) -> Reply:
    """For the one run: decision points at a step no line was shown for (answer and repair)."""
    if BAD in body["messages"][1]["content"] and fake_model.prompt_kind(body) == "decision_points":
        point = {"step": 999, "kind": "error", "trigger": "x", "action": "y", "outcome": "z"}
        return Reply(json.dumps({"points": [point]}))
    return fake_model.respond(body, n)


def _wrong_point(body: dict[str, Any], n: int) -> Reply:
    """For the one run: a card built on decision point 7 of the one it was given."""
    if BAD in body["messages"][1]["content"] and fake_model.prompt_kind(body) == "cards":
        answer = fake_model.cards(body)
        answer["cards"][0]["point"] = 7
        return Reply(json.dumps(answer))
    return fake_model.respond(body, n)


def _requests_about(server, text: str) -> int:
    return sum(1 for b in server.requests if text in b["messages"][1]["content"])


def test_a_step_it_was_not_shown_is_a_rejection_not_a_dead_letter(llm_env, engine) -> None:
    server = llm_env(_wrong_step)
    ingest_examples(engine)
    ingest_lines(engine, [RUN])
    state = retrospect(RetrospectParams(), return_state=True)
    summary = run_summary(state)
    assert state.is_completed(), state.message
    assert summary.rejected == 1 and summary.rejected_again == 0
    assert summary.dead_letters == 0 and summary.trajectories == 13
    assert summary.cards_created > 0  # the other runs' cards
    assert trajectory_counts(engine=engine) == {"done": 13}
    assert _requests_about(server, BAD) == 2  # the answer and its repair, no retry
    [x] = list_rejections(engine=engine)
    assert x.key == BAD and x.part == "retrospect" and x.repeats == 0
    assert "step(s) [999]" in x.reason and '"step": 999' in x.raw
    assert x.run == str(state.state_details.flow_run_id)
    [line] = summary.outcome.rejections
    assert line.startswith(f"{BAD} (retrospect): ") and REPEAT_NOTE not in line
    # nothing was parked: a re-drive (the flow run's Retry) has nothing to send back
    assert list_dead_letters(engine=engine) == [] and redrive(engine=engine, ids=None) == 0

    # asked again (the run sent back by hand), the same answer: said so, still one rejection
    with session_scope(engine) as s:
        s.execute(update(Trajectory).where(col(Trajectory.key) == BAD).values(status="pending"))
    again_state = retrospect(RetrospectParams(), return_state=True)
    again = run_summary(again_state)
    assert again_state.is_completed(), again_state.message
    assert again.rejected == 1 and again.rejected_again == 1 and again.dead_letters == 0
    [x] = list_rejections(engine=engine)
    assert x.repeats == 1 and x.run == str(again_state.state_details.flow_run_id)
    [line] = again.outcome.rejections
    assert REPEAT_NOTE in line


def test_a_card_on_a_point_it_was_not_given_is_a_rejection(llm_env, engine) -> None:
    server = llm_env(_wrong_point)
    ingest_lines(engine, [RUN])
    summary = run_summary(retrospect(RetrospectParams(), return_state=True))
    assert summary.rejected == 1 and summary.dead_letters == 0 and summary.cards_created == 0
    assert _requests_about(server, BAD) == 3  # points, then the cards and their repair
    [x] = list_rejections(engine=engine)
    assert "decision point(s) [7]" in x.reason and '"point": 7' in x.raw
    assert trajectory_counts(engine=engine) == {"done": 1}
