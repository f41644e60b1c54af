"""Contrast: cautions from what the failed runs of a task did and its successful runs did not."""

from __future__ import annotations

import uuid
from collections import defaultdict

from sqlalchemy import select
from sqlmodel import Session

from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.card import Card, CardEvidence
from memory_core.models.trajectory import Step, Trajectory
from memory_core.preconditions import compile_precondition, holds_all, make_context
from memory_core.retrospect.contrast import task_group
from memory_core.task_state import states_before_calls
from tests.helpers.data import tau_path
from tests.helpers.pipeline import card_fingerprint, retrospect_all


def _run(rid: str, outcome: str, cabin: str, *, user: str = "Please move my trip to Friday"):
    """A steps-format run without a task id: grouped by its first user request."""
    return {
        "id": rid,
        "outcome": outcome,
        "steps": [
            {"type": "message", "role": "user", "text": user},
            {"type": "tool_call", "tool": "lookup_trip", "args": {"trip": f"TRIP{rid.upper()}1"},
             "observation": "{}"},
            {"type": "tool_call", "tool": "change_trip",
             "args": {"trip": f"TRIP{rid.upper()}1", "cabin": cabin, "legs": [1, 2]},
             "observation": "ok"},
        ],
    }  # fmt: skip


def _ingest(engine, records):
    ingest(engine=engine, records=records, namespace="default", task_type="default")


def _cards(engine):
    with Session(engine) as s:
        cards = s.execute(select(Card)).scalars().all()
        ev = s.execute(select(CardEvidence)).scalars().all()
    by_card = defaultdict(list)
    for e in ev:
        by_card[e.card_id].append(e)
    return cards, by_card


def test_task_group_rule() -> None:
    user = [Step(index=0, type="message", role="user", text="  Book  a FLIGHT ")]
    assert task_group(extra={"task_id": 7}, steps=user) == "id:7"
    same = task_group(
        extra={}, steps=[Step(index=0, type="message", role="user", text="book a flight")]
    )
    assert task_group(extra={}, steps=user) == same and same.startswith("text:")
    other = [Step(index=0, type="message", role="user", text="book a flight for 2")]
    assert task_group(extra={}, steps=other) != same  # numbers are part of the request
    assert task_group(extra={}, steps=[Step(index=0, type="tool_call", tool="x")]) is None


def test_a_silent_failure_becomes_a_selective_caution(engine) -> None:
    # two tasks: the successes chose "economy"; the failures (no tool error at all) "business"
    monday = "Move my booking to Monday"
    _ingest(
        engine,
        [
            ("a", _run("a", "success", "economy")),
            ("b", _run("b", "success", "economy")),
            ("m", _run("m", "success", "economy", user=monday)),
        ],
    )
    retrospect_all(engine)
    assert _cards(engine)[0] == []  # nothing to contrast with yet
    # the failed siblings arrive in a later batch: the stored successes are read back
    _ingest(
        engine,
        [
            ("c", _run("c", "failure", "business")),
            ("n", _run("n", "failure", "business", user=monday)),
        ],
    )
    retrospect_all(engine)
    cards, by_card = _cards(engine)
    [caution] = [c for c in cards if c.provenance["pattern"] == "contrast_caution"]
    assert caution.preconditions == ['tool == "change_trip"', 'args.cabin == "business"']
    with Session(engine) as s:
        runs = {t.key: t for t in s.execute(select(Trajectory)).scalars()}
    key_of = {t.id: k for k, t in runs.items()}
    roles = {key_of[e.trajectory_id]: e.result["role"] for e in by_card[caution.card_id]}
    assert roles == {
        "c": "supports",
        "n": "supports",
        "a": "contrast",
        "b": "contrast",
        "m": "contrast",
    }
    [of_c] = [e for e in by_card[caution.card_id] if key_of[e.trajectory_id] == "c"]
    assert set(of_c.result["contrast"]["successful_runs"]) == {str(runs["a"].id), str(runs["b"].id)}
    # it fires on a call like the failed one, not on every call of the tool
    compiled = [compile_precondition(p) for p in caution.preconditions]
    for cabin, fires in (("business", True), ("economy", False)):
        state = {"tool": "change_trip", "args": {"trip": "X", "cabin": cabin, "legs": [1]}}
        assert holds_all(compiled, make_context(state), frozenset(state)) is fires
    # a success elsewhere that made the same call counts against it
    before = caution.confidence
    _ingest(engine, [("d", _run("d", "success", "business", user="Upgrade me please"))])
    retrospect_all(engine)
    cards, by_card = _cards(engine)
    [again] = [c for c in cards if c.card_id == caution.card_id]
    assert again.confidence < before
    assert sorted(e.result["role"] for e in by_card[caution.card_id]) == [
        "contradicts", "contrast", "contrast", "contrast", "supports", "supports"
    ]  # fmt: skip


def test_a_feature_of_one_task_keys_no_caution(engine) -> None:
    _ingest(
        engine, [("a", _run("a", "success", "economy")), ("c", _run("c", "failure", "business"))]
    )
    retrospect_all(engine)
    cards, _ = _cards(engine)
    assert not [c for c in cards if c.provenance["pattern"] == "contrast_caution"]


def test_an_identifier_of_another_shape_is_no_lesson(engine) -> None:
    # the same call in every run; the failed run's trip id merely has another shape
    runs = [
        ("a", _run("a", "success", "economy")),
        ("b", _run("b", "success", "economy")),
        ("c", _run("c", "failure", "economy")),
    ]
    runs[2][1]["steps"][2]["args"]["trip"] = "QWERTY"  # letters only; the others mix digits
    _ingest(engine, runs)
    retrospect_all(engine)
    cards, _ = _cards(engine)
    cautions = [c for c in cards if c.provenance["pattern"] == "contrast_caution"]
    assert not any("matches(" in p for c in cautions for p in c.preconditions), cautions


def test_tau_contrast_cards_are_grounded_and_idempotent(engine) -> None:
    _ingest(engine, iter_sources([str(tau_path())]))
    retrospect_all(engine)
    cards, by_card = _cards(engine)
    with Session(engine) as s:
        runs = {t.id: t for t in s.execute(select(Trajectory)).scalars()}
    cautions = [c for c in cards if c.provenance["pattern"] == "contrast_caution"]
    assert cautions  # few: a feature keys one only when it separates across tasks
    for card in cautions:
        compiled = [compile_precondition(p) for p in card.preconditions]
        assert any(p.startswith("tool == ") for p in card.preconditions)
        roles = defaultdict(set)
        for e in by_card[card.card_id]:
            run = runs[e.trajectory_id]
            roles[e.result["role"]].add(run.outcome)
            if not e.action:  # a contrast run that made no call at all
                assert e.result["role"] == "contrast"
                continue
            state = states_before_calls(
                [Step.model_validate(x) for x in run.steps], task_type="default", agent_id=None
            )[e.step]
            held = holds_all(compiled, make_context(state), frozenset(state))
            # supporting and contradicting calls match the caution; contrast runs are beside it
            assert held is (e.result["role"] != "contrast"), (card.preconditions, e.result)
        assert roles["supports"] == {"failure"} and roles["contrast"] == {"success"}
        assert roles.get("contradicts", {"success"}) == {"success"}
    # the answer key never reaches a card
    assert not any("info" in str(c.provenance) for c in cards)
    before = card_fingerprint(engine)
    with Session(engine) as s:  # re-process everything: the same cards, no new evidence
        s.execute(Trajectory.__table__.update().values(status="pending"))
        s.commit()
    retrospect_all(engine)
    assert card_fingerprint(engine) == before


def test_a_fix_comes_only_from_a_run_that_succeeded(engine) -> None:
    _ingest(engine, iter_sources([str(tau_path())]))
    retrospect_all(engine)
    cards, by_card = _cards(engine)
    with Session(engine) as s:
        outcome = {t.id: t.outcome for t in s.execute(select(Trajectory)).scalars()}
    recoveries = [c for c in cards if c.provenance["pattern"] == "error_recovery"]
    assert recoveries
    for card in recoveries:
        assert any(outcome[e.trajectory_id] == "success" for e in by_card[card.card_id])
        # what worked: the call that succeeded and how its arguments changed
        step = card.action_sequence[-1]
        assert step["note"].startswith("this call succeeded")
        assert all(e.result["succeeded_with"]["tool"] for e in by_card[card.card_id])
    # a warning whose every retry succeeded only in runs that failed anyway is a caution: it
    # names the failed call and no step to take instead
    warnings = [c for c in cards if c.provenance["pattern"] == "pre_call_warning"]
    cautions = [
        c
        for c in warnings
        if all(outcome[e.trajectory_id] == "failure" for e in by_card[c.card_id])
    ]
    assert cautions
    for card in cautions:
        assert len(card.action_sequence) == 1
        assert not card.action_sequence[0]["note"].startswith("this call succeeded")
    assert uuid.UUID(str(recoveries[0].card_id))
