"""Retrospection with the rule extractor on real runs, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text, update
from sqlmodel import Session

from memory_core.errors import LeaseLost
from memory_core.ingest.store import ingest, iter_sources
from memory_core.models.card import Card, CardEvidence, CardVersion
from memory_core.models.trajectory import Outcome, Step, Trajectory
from memory_core.preconditions import compile_precondition, holds_all, make_context
from memory_core.retrospect.claims import claim_batch
from memory_core.retrospect.rule_extractor import RuleExtractor
from memory_core.retrospect.stage import process_batch
from memory_core.task_state import planning_state, states_before_calls
from tests.helpers.data import REPO, replicate, tau_path, tau_runs
from tests.helpers.pipeline import card_fingerprint, retrospect_all


def _ingest(engine, paths, task_type="default"):
    return ingest(
        engine=engine,
        records=iter_sources([str(p) for p in paths]),
        namespace="default",
        task_type=task_type,
    )


def test_tau_cards_are_plausible(engine) -> None:
    _ingest(engine, [tau_path()])
    result = retrospect_all(engine)
    assert result.done == 140 and result.dead_letters == 0 and result.cards_created > 5
    with Session(engine) as s:
        cards = s.execute(select(Card)).scalars().all()
        trajectories = {t.id: t for t in s.execute(select(Trajectory)).scalars()}
        evidence = s.execute(select(CardEvidence)).scalars().all()
    assert all(t.status == "done" for t in trajectories.values())
    by_card: dict[uuid.UUID, list[CardEvidence]] = {}
    for e in evidence:
        by_card.setdefault(e.card_id, []).append(e)
    for card in cards:
        assert card.action_sequence and all(a["tool"] for a in card.action_sequence)
        assert card.preconditions and 0.0 < card.confidence <= 0.95
        compiled = [compile_precondition(p) for p in card.preconditions]
        assert card.evidence_count == len(by_card[card.card_id])
        for ev in by_card[card.card_id]:
            if ev.result.get("role") == "contrast":
                continue  # a run shown beside the card's evidence (test_contrast.py)
            traj = trajectories[ev.trajectory_id]  # evidence points back to a stored run
            states = states_before_calls(
                [Step.model_validate(x) for x in traj.steps],
                task_type=traj.task_type,
                agent_id=traj.agent_id,
            )
            state = states[ev.step]
            if card.provenance["pattern"] == "success_path":
                state = planning_state(state)
            assert holds_all(compiled, make_context(state), frozenset(state)), (
                card.scenario,
                ev.step,
            )
    # the same error seen in several runs is one card with several pieces of evidence
    assert max(c.evidence_count for c in cards) >= 3


def test_rerun_and_reingest_change_nothing(engine) -> None:
    _ingest(engine, [tau_path()])
    retrospect_all(engine)
    before = card_fingerprint(engine)
    assert retrospect_all(engine).claimed == 0
    _ingest(engine, [tau_path()])
    assert retrospect_all(engine).claimed == 0
    assert card_fingerprint(engine) == before


def test_examples_yield_every_pattern(engine) -> None:
    _ingest(engine, [REPO / "examples"])
    retrospect_all(engine)
    with Session(engine) as s:
        patterns = {c.provenance["pattern"] for c in s.execute(select(Card)).scalars()}
        versions = s.execute(select(func.count()).select_from(CardVersion)).scalar_one()
        cards = s.execute(select(func.count()).select_from(Card)).scalar_one()
    assert patterns == {"pre_call_warning", "error_recovery", "success_path"}
    assert versions == cards  # each new card has its first history row


def test_a_run_that_teaches_nothing_yields_no_card() -> None:
    steps = [
        Step(index=0, type="tool_call", tool="lookup", args={"q": 1}, observation="ok"),
        Step(index=1, type="tool_call", tool="answer", args={}, observation="done"),
    ]
    from memory_core.models.drafts import TrajectoryView

    view = TrajectoryView(
        id=uuid.uuid4(),
        namespace="n",
        task_type="default",
        agent_id=None,
        outcome=Outcome.success,
        steps=steps,
    )
    assert RuleExtractor().extract(view).drafts == []
    typed = TrajectoryView(
        id=view.id,
        namespace="n",
        task_type="lookup_task",
        agent_id=None,
        outcome=Outcome.success,
        steps=steps,
    )
    [card] = RuleExtractor().extract(typed).drafts
    assert card.pattern == "success_path" and card.preconditions == ['task_type == "lookup_task"']


def test_concurrent_workers_process_each_run_once(settings, engine) -> None:
    runs = replicate(tau_runs(), 700)
    ingest(
        engine=engine,
        records=((f"r{i}", r) for i, r in enumerate(runs)),
        namespace="default",
        task_type="default",
    )
    results, errors = [], []

    def work() -> None:
        try:
            # the production lease (300 s): at load ~8 a 60 s lease expired mid-batch (LeaseLost)
            results.append(retrospect_all(engine, batch_size=25, lease_s=300.0))
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(r.done for r in results) == 700
    with Session(engine) as s:
        assert (
            s.execute(
                select(func.count()).select_from(Trajectory).where(Trajectory.status != "done")
            ).scalar_one()
            == 0
        )
        dup = s.execute(
            text(
                "SELECT count(*) FROM (SELECT namespace, signature FROM card "
                "GROUP BY namespace, signature HAVING count(*) > 1) d"
            )
        ).scalar_one()
        evidence = s.execute(select(func.count()).select_from(CardEvidence)).scalar_one()
        counted = s.execute(select(func.sum(Card.evidence_count))).scalar_one()
    assert dup == 0 and evidence == counted


def test_an_expired_lease_passes_the_work_to_another_worker(engine) -> None:
    _ingest(engine, [REPO / "examples"])
    slow = claim_batch(engine=engine, worker="slow", batch_size=5, lease=timedelta(seconds=-1))
    assert len(slow) == 5
    fast = claim_batch(engine=engine, worker="fast", batch_size=100, lease=timedelta(minutes=5))
    assert {t.id for t in slow} <= {t.id for t in fast}  # the abandoned claims came back
    with pytest.raises(LeaseLost):
        process_batch(engine=engine, rows=slow, extractor=RuleExtractor(), worker="slow")
    result = process_batch(engine=engine, rows=fast, extractor=RuleExtractor(), worker="fast")
    assert result.done == 12
    assert card_fingerprint(engine)  # the slow worker wrote nothing; the fast one did


def test_a_poisoned_trajectory_is_parked_not_blocking(engine) -> None:
    _ingest(engine, [REPO / "examples"])
    with Session(engine) as s:
        victim = s.execute(select(Trajectory.id).limit(1)).scalar_one()
        s.execute(
            update(Trajectory)
            .where(Trajectory.id == victim)
            .values(steps=[{"index": 0, "type": "teleport"}])
        )
        s.commit()
    result = retrospect_all(engine)
    assert result.dead_letters == 1 and result.done == 11
    with Session(engine) as s:
        row = s.get(Trajectory, victim)
    assert row.status == "dead_letter" and "ValidationError" in row.error
