"""The validation gate (Great Expectations) and the review queue, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import insert, select
from sqlmodel import Session

from memory_core.errors import InvalidInput
from memory_core.models.card import Card, CardVersion
from memory_core.models.columns import utcnow
from memory_core.models.validation import ValidationRun
from memory_core.validate.review import decide, edit, review_queue
from memory_core.validate.stage import latest_run, validate_drafts
from memory_core.validate.summary import report_folder


def _card(**kw) -> dict:
    now = utcnow()
    base = {
        "card_id": uuid.uuid4(),
        "namespace": "default",
        "kind": "experience",
        "scenario": "When the export query times out",
        "preconditions": ['tool == "q"'],
        "action_sequence": [{"tool": "q", "params_template": {}, "note": ""}],
        "expected_outcome": "ok",
        "actual_outcome": "ok",
        "failure_modes": [],
        "confidence": 0.6,
        "status": "draft",
        "signature": uuid.uuid4().hex,
        "provenance": {},
        "evidence_count": 0,
        "created_at": now,
        "updated_at": now,
        "use_count": 0,
        "success_count": 0,
        "failure_count": 0,
        "consecutive_failures": 0,
        "version": 1,
    }
    base.update(kw)
    return base


def _insert(engine, rows: list[dict]) -> None:
    with Session(engine) as s:
        s.execute(insert(Card), rows)
        s.commit()


def _statuses(engine) -> dict[uuid.UUID, str]:
    with Session(engine) as s:
        return dict(s.execute(select(Card.card_id, Card.status)).tuples().all())


BROKEN = {
    "scenario present": {"scenario": "   "},
    "scenario length": {"scenario": "x" * 600},
    "expected outcome length": {"expected_outcome": "y" * 2001},
    "confidence within 0..1": {"confidence": 1.5},
    "non-empty action sequence": {"action_sequence": []},
    "every step names a tool": {"action_sequence": [{"tool": "", "params_template": {}}]},
    "preconditions compile": {"preconditions": ["tool = 'q'"]},
    "no secrets in text": {
        "failure_modes": [{"mode": "auth", "handling": "use key sk-live0123456789abcdefXYZ"}]
    },
    "tools in the registry": {"action_sequence": [{"tool": "rm_rf", "params_template": {}}]},
}


def test_each_expectation_catches_exactly_its_card(engine, tmp_path) -> None:
    good = _card()
    broken = {rule: _card(**change) for rule, change in BROKEN.items()}
    _insert(engine, [good, *broken.values()])
    report = validate_drafts(engine=engine, reports_dir=tmp_path, registry=frozenset({"q"}))
    assert report.evaluated == 10 and report.activated == 1 and report.rejected == 9
    assert report.rule_failures == {rule: 1 for rule in BROKEN}
    run = latest_run(engine=engine)
    for rule, card in broken.items():
        assert run.failed_cards[str(card["card_id"])] == [rule]
    statuses = _statuses(engine)
    assert statuses[good["card_id"]] == "active"
    assert all(statuses[c["card_id"]] == "rejected" for c in broken.values())
    with Session(engine) as s:
        history = (
            s.execute(
                select(CardVersion).where(
                    CardVersion.card_id == broken["preconditions compile"]["card_id"]
                )
            )
            .scalars()
            .all()
        )
    assert [h.reason for h in history] == ["rejected by validation: preconditions compile"]
    assert (report_folder(tmp_path, "default") / "index.html").is_file()


def test_a_mixed_batch_ends_with_the_right_statuses(engine, tmp_path) -> None:
    good, doubtful, broken = _card(), _card(confidence=0.3), _card(action_sequence=[])
    _insert(engine, [good, doubtful, broken])
    report = validate_drafts(engine=engine, reports_dir=tmp_path)
    assert (report.activated, report.review, report.rejected) == (1, 1, 1)
    statuses = _statuses(engine)
    assert [statuses[c["card_id"]] for c in (good, doubtful, broken)] == [
        "active",
        "review",
        "rejected",
    ]
    assert validate_drafts(engine=engine, reports_dir=tmp_path).evaluated == 0  # nothing left


def test_review_decisions_land_in_history(engine, tmp_path) -> None:
    a, b, c = _card(confidence=0.3), _card(confidence=0.4), _card(confidence=0.2)
    _insert(engine, [a, b, c])
    validate_drafts(engine=engine, reports_dir=None)
    assert len(review_queue(engine=engine, namespace="default")) == 3
    decide(engine=engine, namespace="default", card_id=a["card_id"], approve=True, actor="ana")
    with pytest.raises(InvalidInput, match="needs a reason"):
        decide(
            engine=engine,
            namespace="default",
            card_id=b["card_id"],
            approve=False,
            actor="bo",
            reason=" ",
        )
    decide(
        engine=engine,
        namespace="default",
        card_id=b["card_id"],
        approve=False,
        actor="bo",
        reason="too specific",
    )
    with pytest.raises(InvalidInput, match="preconditions compile"):
        edit(
            engine=engine,
            namespace="default",
            card_id=c["card_id"],
            changes={"preconditions": ["tool ="]},
            actor="cy",
        )
    with pytest.raises(InvalidInput, match="confidence"):  # a bad value is named, not a crash
        edit(
            engine=engine,
            namespace="default",
            card_id=c["card_id"],
            changes={"confidence": 7},
            actor="cy",
        )
    edit(
        engine=engine,
        namespace="default",
        card_id=c["card_id"],
        changes={"scenario": "When the nightly export query times out"},
        actor="cy",
    )
    with pytest.raises(InvalidInput, match="not in review"):
        decide(engine=engine, namespace="default", card_id=a["card_id"], approve=True, actor="ana")
    statuses = _statuses(engine)
    assert [statuses[x["card_id"]] for x in (a, b, c)] == ["active", "rejected", "review"]
    with Session(engine) as s:
        rows = s.execute(select(CardVersion).order_by(CardVersion.created_at)).scalars().all()
    trail = {(r.card_id, r.actor, r.reason, r.version) for r in rows}
    # validation is a version of its own, by the validator, so a person's is only theirs
    why = "passed validation, confidence below 0.5: waits in review"
    assert {(x["card_id"], "validator", why, 2) for x in (a, b, c)} <= trail
    assert (a["card_id"], "ana", "approved in review", 3) in trail
    assert (b["card_id"], "bo", "rejected in review: too specific", 3) in trail
    assert (c["card_id"], "cy", "edited in review: scenario", 3) in trail
    edited = next(r for r in rows if r.actor == "cy")
    assert edited.snapshot["changed_fields"] == ["scenario"]
    with Session(engine) as s:
        assert s.get(Card, c["card_id"]).scenario == "When the nightly export query times out"


@pytest.mark.parametrize("n", [0, 100_000])
def test_empty_and_huge_batches(engine, tmp_path, n) -> None:
    rows = [_card(confidence=0.3 if i % 10 == 0 else 0.7) for i in range(n)]
    for i in range(0, n, 10_000):
        _insert(engine, rows[i : i + 10_000])
    report = validate_drafts(engine=engine, reports_dir=tmp_path)
    assert report.evaluated == n and report.review == n // 10 and report.rejected == 0
    assert report.activated == n - n // 10


def test_a_relative_data_dir_still_gets_its_report(engine, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _insert(engine, [_card()])
    report = validate_drafts(engine=engine, reports_dir=Path(".hindsight") / "reports")
    assert report.docs_index == str(
        report_folder(tmp_path / ".hindsight" / "reports", "default") / "index.html"
    )
    assert Path(report.docs_index).is_file()


def test_each_namespace_gets_its_own_report(engine, tmp_path) -> None:
    a, b = _card(namespace="team-a", action_sequence=[]), _card(namespace="team-b")
    _insert(engine, [a, b])
    report = validate_drafts(engine=engine, reports_dir=tmp_path)
    assert (report.evaluated, report.activated, report.rejected) == (2, 1, 1)
    assert report.rule_failures == {"non-empty action sequence": 1}

    def pages(ns: str) -> bytes:
        return b"".join(p.read_bytes() for p in report_folder(tmp_path, ns).rglob("*.html"))

    def named(card: dict, text: bytes) -> bool:
        return any(i.encode() in text for i in (str(card["card_id"]), card["card_id"].hex))

    assert named(a, pages("team-a")) and not named(a, pages("team-b"))  # a failure lists ids
    assert pages("team-b") and not named(b, pages("team-a"))
    with Session(engine) as s:
        runs = s.execute(select(ValidationRun.namespace, ValidationRun.evaluated)).tuples().all()
    assert sorted(runs) == [("team-a", 1), ("team-b", 1)]
