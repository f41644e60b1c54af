"""Failed final answers contrasted with the successful trials of their task, keyed on shape.

qa_runs.json (beside this file) holds question-answering runs over LoCoMo conversations made by
bench/qa_runs.py (search / read / finish, no tool errors; 8 questions, 5 trials each).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from bench.lessons_cards import card_key
from memory_core.backtest.stage import run_gate
from memory_core.consolidate.stage import consolidate
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardEvidence
from memory_core.models.drafts import DraftCard
from memory_core.preconditions import compile_precondition, holds_all, make_context
from memory_core.retrospect.contrast_answers import (
    FinalAnswer,
    keys_on_answer,
    stored_final_answers,
)
from memory_core.settings import Settings
from memory_core.validate.stage import validate_drafts
from tests.helpers.data import tau_runs
from tests.helpers.pipeline import card_fingerprint, retrospect_all

RUNS = Path(__file__).parent / "qa_runs.json"
LABELS = Path(__file__).parent / "labelled_answer_cards.json"  # bench/qa_lessons.py's cards


def _qa_runs(rename: dict[str, str] | None = None) -> list[dict[str, Any]]:
    runs = json.loads(RUNS.read_text())
    for r in runs:
        for s in r["steps"]:
            if s.get("tool") in (rename or {}):
                s["tool"] = (rename or {})[s["tool"]]
    return runs


def _learn(engine, runs: list[dict[str, Any]], namespace: str = "qa") -> None:
    # the memory never sees `info` (the policy, the gold answer)
    records = [(r["id"], {k: v for k, v in r.items() if k != "info"}) for r in runs]
    ingest(engine=engine, records=records, namespace=namespace, task_type="default")
    retrospect_all(engine, batch_size=200)
    settings = Settings()
    validate_drafts(engine=engine, reports_dir=None, review_below=settings.review.below)
    consolidate(engine=engine, namespace=namespace, rules=settings.consolidate)
    run_gate(engine=engine, rules=settings.gate, namespace=namespace)


def _cards(engine, namespace: str = "qa") -> list[Card]:
    with Session(engine) as s:
        return list(s.exec(select(Card).where(col(Card.namespace) == namespace)).all())


def _draft(*preconditions: str) -> DraftCard:
    return DraftCard(
        pattern="contrast_caution",
        scenario="s",
        preconditions=list(preconditions),
        action_sequence=[],
        expected_outcome="",
        actual_outcome="",
        failure_modes=[],
        confidence=0.5,
        evidence=[],
        provenance={},
    )


def _holds(card: Card, state: dict[str, Any]) -> bool:
    compiled = [compile_precondition(p) for p in card.preconditions]
    return holds_all(compiled, make_context(state), frozenset(state))


def test_the_generated_runs_mix_outcomes_without_tool_errors() -> None:
    runs = _qa_runs()
    tasks: dict[str, set[str]] = {}
    for r in runs:
        tasks.setdefault(r["task_id"], set()).add(r["outcome"])
        assert not any(s.get("error") for s in r["steps"])
        assert r["steps"][-1]["tool"] == "finish"
    assert sum(o == {"success", "failure"} for o in tasks.values()) >= 3
    assert len({r["info"]["policy"] for r in runs}) >= 3


def test_the_guard_refuses_a_key_on_the_answer() -> None:
    final = FinalAnswer("finish", frozenset({"answer"}))
    assert keys_on_answer(_draft('tool == "finish"', 'args.answer == "yes"'), final)
    assert keys_on_answer(_draft('tool == "finish"', "args['answer'] == 'yes'"), final)
    assert keys_on_answer(_draft('tool == "finish"', '"yes" in args'), final)
    assert not keys_on_answer(_draft('tool == "finish"', '!("read" in tools_used)'), final)
    assert not keys_on_answer(_draft('tool == "search"', 'args.answer == "yes"'), final)
    assert not keys_on_answer(_draft('tool == "finish"', 'args.answer == "yes"'), None)


def test_the_final_answer_is_read_from_the_data(engine) -> None:
    ingest(
        engine=engine,
        records=[(r["id"], r) for r in _qa_runs({"finish": "submit_reply"})],
        namespace="qa",
        task_type="default",
    )
    ingest(
        engine=engine,
        records=[(f"tau{i}", r) for i, r in enumerate(tau_runs())],
        namespace="air",
        task_type="default",
    )
    retrospect_all(engine, batch_size=200)  # names the runs' task groups
    finals = stored_final_answers(engine, ["qa", "air"])
    assert finals["qa"] == FinalAnswer("submit_reply", frozenset({"answer"}))
    assert finals["air"] is None  # the airline runs end with many different actions


def test_failed_answers_teach_what_the_successful_trials_did_first(engine) -> None:
    _learn(engine, _qa_runs())
    cards = _cards(engine)
    final = FinalAnswer("finish", frozenset({"answer"}))
    assert not [c.scenario for c in cards if keys_on_answer(_draft(*c.preconditions), final)]
    shaped = [c for c in cards if c.provenance.get("producer") == "contrast_answers"]
    [read_first] = [c for c in shaped if '!("read" in tools_used)' in c.preconditions]
    assert read_first.status == "active", read_first.flags
    assert read_first.preconditions == ['tool == "finish"', '!("read" in tools_used)']
    assert [a["tool"] for a in read_first.action_sequence][-2:] == ["read", "finish"]
    # it fires on an answer given before any read, whatever the answer, and not after one
    for answer in ("yes", "7 May 2023"):
        ask = {"tool": "finish", "args": {"answer": answer}, "tools_used": ["search"], "step": 1}
        assert _holds(read_first, ask)
        assert not _holds(read_first, {**ask, "tools_used": ["search", "read"], "step": 2})
    with Session(engine) as s:
        ev = s.exec(
            select(CardEvidence).where(col(CardEvidence.card_id) == read_first.card_id)
        ).all()
    groups = {e.result["group"] for e in ev if e.result.get("role") == "supports"}
    assert len(groups) >= 2  # learned from several questions, each counted once
    assert {e.result.get("role") for e in ev} >= {"supports", "contrast"}
    # by reading: an active card is one a reader would act on, never one labelled wrong
    labels = {json.dumps(r["key"], ensure_ascii=False): r for r in json.loads(LABELS.read_text())}
    assert all(str(r["reason"]).strip() for r in labels.values())
    active = [card_key(c) for c in cards if c.status == "active"]
    assert labels[card_key(read_first)]["label"] == "useful"
    assert not [k for k in active if labels.get(k, {}).get("label") == "wrong"]


def test_answers_alike_across_questions_key_nothing(engine) -> None:
    # the failed trials of three questions all answered "yes" without reading; the successful
    # trials read first and answered otherwise: the lesson is the read, never the "yes"
    runs = []
    for q in range(3):
        for t, ok in enumerate((True, True, False, False)):
            steps: list[dict[str, Any]] = [
                {"type": "message", "role": "user", "text": f"question {q}?"},
                {"type": "tool_call", "tool": "lookup", "args": {"q": f"terms {q}"},
                 "observation": "hits"},
            ]  # fmt: skip
            if ok:
                steps.append({"type": "tool_call", "tool": "open", "args": {"doc": f"d{q}"},
                              "observation": "text"})  # fmt: skip
            answer = f"answer number {q}" if ok else "yes"
            steps.append({"type": "tool_call", "tool": "reply", "args": {"text": answer},
                          "observation": "ok"})  # fmt: skip
            runs.append({"id": f"q{q}t{t}", "task_id": f"q{q}",
                         "outcome": "success" if ok else "failure", "steps": steps})  # fmt: skip
    _learn(engine, runs)
    cards = _cards(engine)
    assert cards
    assert not [c.preconditions for c in cards if any("args" in p for p in c.preconditions)]
    lessons = [c for c in cards if c.provenance.get("producer") == "contrast_answers"]
    assert sorted(c.preconditions for c in lessons) == [
        ['tool == "reply"', '!("open" in tools_used)'],
        ['tool == "reply"', "step < 2"],
    ]
    before = card_fingerprint(engine)
    retrospect_all(engine, batch_size=200)  # a re-run writes nothing new
    assert card_fingerprint(engine) == before


def test_renamed_tools_teach_the_same_lesson(engine) -> None:
    rename = {"finish": "submit_reply", "read": "open_turn", "search": "lookup"}
    _learn(engine, _qa_runs(rename))
    shaped = [c for c in _cards(engine) if c.provenance.get("producer") == "contrast_answers"]
    assert ['tool == "submit_reply"', '!("open_turn" in tools_used)'] in [
        c.preconditions for c in shaped
    ]


def test_the_fixture_is_what_the_generator_makes() -> None:
    from bench.qa_runs import generate, load, pick
    from tests.helpers.data import shared_data_dir

    made = pick(
        generate(load(shared_data_dir() / "locomo"), n_questions=100, trials=5), mixed=6, others=2
    )
    assert made == copy.deepcopy(_qa_runs())
