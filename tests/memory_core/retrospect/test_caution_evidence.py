"""A caution's evidence is counted by task groups, and one its evidence does not favour waits."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlmodel import Session

from memory_core.cards.confidence import UNCONFIRMED_CAP, RunEvidence, estimate
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardEvidence
from memory_core.validate.stage import validate_drafts
from tests.helpers.pipeline import retrospect_all

FRIDAY = "Please move my trip to Friday"
MONDAY = "Move my booking to Monday"
UPGRADE = "Upgrade me please"
UPGRADE_TOO = "Could you upgrade my seat"


def _ev(supports: bool, outcome: str, group: str | None) -> RunEvidence:
    return RunEvidence(supports=supports, confirms=supports, outcome=outcome, group=group)


def test_the_trials_of_one_task_count_once() -> None:
    four = {uuid.uuid4(): _ev(True, "failure", "id:1") for _ in range(4)}
    est = estimate(four)
    assert (est.supporting, est.contradicting, est.confidence) == (1, 0, round(2 / 3, 6))
    # without a group each run is its own unit, as before
    alone = {uuid.uuid4(): _ev(True, "failure", None) for _ in range(4)}
    assert estimate(alone).supporting == 4 and estimate(alone).confidence == round(5 / 6, 6)


def test_evidence_that_does_not_favour_a_lesson_is_capped() -> None:
    runs = {uuid.uuid4(): _ev(True, "failure", f"id:{g}") for g in (1, 1, 2)}
    runs |= {uuid.uuid4(): _ev(False, "success", f"id:{g}") for g in (3, 4)}
    est = estimate(runs)  # two groups for, two against: the prior's 0.5, no lesson
    assert (est.supporting, est.contradicting) == (2, 2)
    assert est.confidence == UNCONFIRMED_CAP
    runs[uuid.uuid4()] = _ev(True, "failure", "id:5")  # a third group for it: 4/7
    assert estimate(runs).confidence == round(4 / 7, 6)


def _run(rid: str, outcome: str, cabin: str, user: str) -> dict[str, object]:
    return {
        "id": rid,
        "outcome": outcome,
        "steps": [
            {"type": "message", "role": "user", "text": user},
            {"type": "tool_call", "tool": "lookup_trip", "args": {"trip": "TRIP1"},
             "observation": "{}"},
            {"type": "tool_call", "tool": "change_trip",
             "args": {"trip": "TRIP1", "cabin": cabin}, "observation": "ok"},
        ],
    }  # fmt: skip


def _caution(engine) -> tuple[Card, list[CardEvidence]]:
    with Session(engine) as s:
        cards = s.execute(select(Card)).scalars().all()
        [card] = [c for c in cards if c.provenance["pattern"] == "contrast_caution"]
        ev = s.execute(select(CardEvidence).where(CardEvidence.card_id == card.card_id))
        return card, list(ev.scalars())


def _ingest(engine, runs) -> None:
    records = [(str(r["id"]), r) for r in runs]
    ingest(engine=engine, records=records, namespace="default", task_type="default")


def _two_tasks(trials: int) -> list[dict[str, object]]:
    """Two tasks whose successes chose "economy" and whose failed trials chose "business": a
    feature seen in one task only keys no caution (memory_core.retrospect.keys)."""
    runs = []
    for task, user in (("f", FRIDAY), ("m", MONDAY)):
        for i in range(trials):
            runs.append(_run(f"{task}ok{i}", "success", "economy", user))
            runs.append(_run(f"{task}bad{i}", "failure", "business", user))
    return runs


def test_a_caution_counts_task_groups_on_both_sides(engine) -> None:
    _ingest(engine, _two_tasks(trials=2))
    retrospect_all(engine)
    card, ev = _caution(engine)
    assert card.preconditions == ['tool == "change_trip"', 'args.cabin == "business"']
    supporting = {e.result.get("group") for e in ev if e.result["role"] == "supports"}
    assert len(supporting) == 2 and all(g.startswith("text:") for g in supporting)
    assert card.confidence == round(3 / 4, 6)  # two tasks behind it, not four runs (5/6)
    # two successful trials of each of two other tasks make the same call: two groups against
    for user in (UPGRADE, UPGRADE_TOO):
        _ingest(engine, [_run(f"{user}-{i}", "success", "business", user) for i in range(2)])
    retrospect_all(engine)
    card, ev = _caution(engine)
    against = [e.result for e in ev if e.result["role"] == "contradicts"]
    assert len(against) == 4 and len({r["group"] for r in against}) == 2
    assert card.confidence == UNCONFIRMED_CAP  # 2 tasks for, 2 against: not favoured


def test_a_feature_of_one_task_keys_no_caution(engine) -> None:
    _ingest(engine, [r for r in _two_tasks(trials=2) if str(r["id"]).startswith("f")])
    retrospect_all(engine)
    with Session(engine) as s:
        cards = s.execute(select(Card)).scalars().all()
    assert not [c for c in cards if c.provenance["pattern"] == "contrast_caution"]


def test_a_caution_its_evidence_does_not_favour_waits_for_review(engine) -> None:
    _ingest(
        engine,
        [
            *_two_tasks(trials=1),
            _run("d", "success", "business", UPGRADE),
            _run("g", "success", "business", UPGRADE_TOO),
        ],
    )
    retrospect_all(engine)
    validate_drafts(engine=engine, reports_dir=None, review_below=0.5)
    card, _ = _caution(engine)
    assert (card.confidence, card.status) == (UNCONFIRMED_CAP, "review")


def test_an_active_caution_that_later_runs_contradict_goes_back_to_review(engine) -> None:
    from memory_core.models.card import CardVersion

    _ingest(engine, _two_tasks(trials=1))
    retrospect_all(engine)
    validate_drafts(engine=engine, reports_dir=None, review_below=0.5)
    card, _ = _caution(engine)
    assert card.status == "active"  # two tasks for it, none against: 3/4
    # a later night: successful runs of two other tasks made the same call
    _ingest(
        engine,
        [
            _run("d", "success", "business", UPGRADE),
            _run("g", "success", "business", UPGRADE_TOO),
        ],
    )
    retrospect_all(engine)
    card, _ = _caution(engine)
    assert (card.status, card.confidence) == ("review", UNCONFIRMED_CAP)
    with Session(engine) as s:
        last = (
            s.execute(
                select(CardVersion)
                .where(CardVersion.card_id == card.card_id)
                .order_by(CardVersion.version.desc())  # type: ignore[attr-defined]
            )
            .scalars()
            .first()
        )
    assert last is not None and last.version == card.version
    assert "no longer favours" in last.reason and last.snapshot["contradicting"] == 2


def _failing(rid: str, user: str) -> dict[str, object]:
    return {
        "id": rid,
        "outcome": "failure",
        "steps": [
            {"type": "message", "role": "user", "text": user},
            {"type": "tool_call", "tool": "book_seat", "args": {"seat": "12A"},
             "observation": "Error: payment service unavailable"},
        ],
    }  # fmt: skip


def _warning_confidence(engine, namespace: str) -> float:
    with Session(engine) as s:
        cards = s.execute(select(Card).where(Card.namespace == namespace)).scalars().all()
        [conf] = [c.confidence for c in cards if "unavailable" in str(c.failure_modes)]
        return conf


def test_an_error_seen_in_the_trials_of_one_task_counts_once(engine) -> None:
    records = [(f"r{i}", _failing(f"r{i}", FRIDAY)) for i in range(3)]
    ingest(engine=engine, records=records, namespace="trials", task_type="default")
    ingest(engine=engine, records=records[:1], namespace="one", task_type="default")
    retrospect_all(engine)
    # three trials of one task are one piece of evidence: as sure as one run, no surer
    assert _warning_confidence(engine, "trials") == _warning_confidence(engine, "one")
    # three other tasks with the same error are three
    others = [(f"o{i}", _failing(f"o{i}", f"{UPGRADE} number {i}")) for i in range(3)]
    ingest(engine=engine, records=others, namespace="trials", task_type="default")
    retrospect_all(engine)
    assert _warning_confidence(engine, "trials") > _warning_confidence(engine, "one")
    with Session(engine) as s:
        rows = s.execute(select(CardEvidence)).scalars().all()
    assert all(r.result.get("group") for r in rows)
