"""Support counts distinct runs: a run that repeats one failure many times keeps a
row of evidence per repeat, but weighs as one run in the ranking, the tie rule, the
consolidation survivor and the other "most evidence first" orderings."""

from __future__ import annotations

import time
import uuid

from sqlalchemy import select
from sqlmodel import Session

from memory_core.cards.query import get_card
from memory_core.cards.writer import write_drafts
from memory_core.models.card import ActionStep, Card, CardStatus, EvidenceTriple, FailureMode
from memory_core.models.columns import utcnow
from memory_core.models.drafts import DraftCard
from memory_core.models.trajectory import Trajectory
from memory_core.serve.retrieval import retrieve
from memory_core.serve.snapshot_cache import SnapshotCache
from memory_core.settings import RankingWeights

NS = "team-a"
RUNS = RankingWeights(support_counts="runs")
STATE = {"tool": "book", "args": {}}


def _runs(engine, n: int) -> list[uuid.UUID]:
    """n stored failed runs (the evidence rows point at them)."""
    with Session(engine) as s, s.begin():
        runs = [
            Trajectory(
                namespace=NS,
                key=f"run-{uuid.uuid4().hex}",
                content_hash=uuid.uuid4().hex,
                source_format="steps",
                task_type="default",
                outcome="failure",
            )
            for _ in range(n)
        ]
        s.add_all(runs)
        s.flush()
        return [r.id for r in runs]


def _draft(mode: str, evidence: list[tuple[uuid.UUID, int]]) -> DraftCard:
    return DraftCard(
        pattern="pre_call_warning",
        scenario=f"book can fail with {mode}",
        preconditions=['tool == "book"'],
        action_sequence=[ActionStep(tool="book")],
        expected_outcome="booked",
        actual_outcome=mode,
        failure_modes=[FailureMode(mode=mode, handling="check first")],
        confidence=0.7,
        evidence=[
            EvidenceTriple(
                trajectory_id=t,
                step=step,
                condition={"tool": "book"},
                action={"tool": "book"},
                result={"outcome": "failure", "error": mode, "confirms": True},
            )
            for t, step in evidence
        ],
    )


def _write(engine, *drafts: DraftCard) -> None:
    with Session(engine) as s, s.begin():
        write_drafts(
            session=s,
            namespace=NS,
            drafts=list(drafts),
            status=CardStatus.active,
            provenance={"source": "agent_run"},
        )


def _cards(engine) -> dict[str, Card]:
    with Session(engine) as s:
        return {c.actual_outcome: c for c in s.execute(select(Card)).scalars()}


def _mode(scenario: str) -> str:
    return scenario.removeprefix("book can fail with ")


def test_one_run_repeating_a_failure_weighs_as_one_run_when_support_counts_runs(engine) -> None:
    three = _runs(engine, 3)
    (looping,) = _runs(engine, 1)
    spread = _draft("seat gone", [(t, 2) for t in three])
    repeated = _draft("card declined", [(looping, step) for step in range(20)])
    _write(engine, spread, repeated)
    cards = _cards(engine)
    # every repeat stays a row of evidence (it explains the card), the run counts once
    assert (cards["seat gone"].evidence_count, cards["seat gone"].run_count) == (3, 3)
    assert (cards["card declined"].evidence_count, cards["card declined"].run_count) == (20, 1)
    assert cards["seat gone"].confidence == cards["card declined"].confidence
    with Session(engine) as s:  # readers (API, `cards show`) see both
        shown = get_card(session=s, namespace=NS, card_id=cards["card declined"].card_id)
    assert (shown.evidence_count, shown.run_count) == (20, 1)

    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    served = retrieve(snapshot=cache.get(NS), state=STATE, now=utcnow(), weights=RUNS).matches
    assert [(_mode(m.entry.scenario), round(m.score.support, 3)) for m in served] == [
        ("seat gone", 1.0),
        ("card declined", 0.333),
    ]
    # by default support counts rows: the error hit twenty times leads (see RankingWeights)
    served = retrieve(snapshot=cache.get(NS), state=STATE, now=utcnow()).matches
    assert [(_mode(m.entry.scenario), round(m.score.support, 3)) for m in served] == [
        ("card declined", 1.0),
        ("seat gone", 0.15),
    ]

    # changed after the snapshot: the looping run loops on, and a second run meets the error;
    # a re-run of the same drafts adds nothing (the writer is idempotent)
    (second,) = _runs(engine, 1)
    more = _draft("card declined", [(looping, step) for step in range(20, 40)] + [(second, 0)])
    _write(engine, more, repeated, spread)
    deadline = time.monotonic() + 5  # served within a second: what the feed promises, with slack
    while True:
        cache.invalidate([NS])  # as a write through the service does: the next read waits
        snap = cache.get(NS)
        by_mode = {_mode(e.scenario): e for e in snap.entries.values()}
        if by_mode["card declined"].evidence_count != 20 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert cache.reloads == 0  # applied from the change feed
    assert (by_mode["card declined"].evidence_count, by_mode["card declined"].run_count) == (41, 2)
    assert (by_mode["seat gone"].evidence_count, by_mode["seat gone"].run_count) == (3, 3)
    served = retrieve(snapshot=snap, state=STATE, now=utcnow(), weights=RUNS).matches
    assert [_mode(m.entry.scenario) for m in served] == ["seat gone", "card declined"]
    assert served[1].score.support == 2 / 3


def test_a_merge_unions_the_runs_and_the_runs_choose_the_survivor(engine) -> None:
    from memory_core.consolidate.stage import consolidate
    from memory_core.settings import ConsolidateRules

    looping, other, third = _runs(engine, 3)
    # the same lesson twice (one error, its card number masked): one card from a run looping
    # 20 times, one from three runs, one of them the looping run
    _write(
        engine,
        _draft("card 4111 declined", [(looping, step) for step in range(20)]),
        _draft("card 5500 declined", [(looping, 30), (other, 1), (third, 1)]),
    )
    report = consolidate(engine=engine, namespace=NS, rules=ConsolidateRules())
    assert (report.merges, report.absorbed) == (1, 1)
    cards = _cards(engine)
    survivor, absorbed = cards["card 5500 declined"], cards["card 4111 declined"]
    assert survivor.status == "active" and absorbed.superseded_by == survivor.card_id
    assert survivor.run_count == 3  # the union: the looping run counts once, not a sum (4)
    assert survivor.evidence_count == 23  # every row still explains the card
    again = consolidate(engine=engine, namespace=NS, rules=ConsolidateRules())
    assert again.merges == 0 and _cards(engine)["card 5500 declined"].run_count == 3


def test_the_migration_backfills_runs_and_the_feed_watches_them(settings, engine) -> None:
    from alembic import command
    from sqlalchemy import func, text

    from memory_core import db
    from memory_core.models.card_change import CardChange

    db.upgrade(settings, "head")
    three, (looping,), (shown, against) = _runs(engine, 3), _runs(engine, 1), _runs(engine, 2)
    seat = _draft("seat gone", [(t, 2) for t in three])
    # a run shown for contrast and one that contradicts the lesson support nothing
    for tid, role in ((shown, "contrast"), (against, "contradicts")):
        seat.evidence.append(EvidenceTriple(trajectory_id=tid, step=1, result={"role": role}))
    _write(engine, seat, _draft("card declined", [(looping, step) for step in range(20)]))
    assert _cards(engine)["seat gone"].run_count == 3
    command.downgrade(db.alembic_config(settings.sqlalchemy_url), "0014")
    with engine.begin() as conn:  # the downgrade kept the feed's triggers (SQLite rewrote card)
        seq = conn.execute(text("SELECT COUNT(*) FROM card_change")).scalar_one()
        conn.execute(text("UPDATE card SET confidence = 0.5"))
        assert conn.execute(text("SELECT COUNT(*) FROM card_change")).scalar_one() == seq + 2
    db.upgrade(settings, "head")
    cards = _cards(engine)
    assert {m: (c.evidence_count, c.run_count) for m, c in cards.items()} == {
        "seat gone": (5, 3),
        "card declined": (20, 1),
    }

    def feed() -> int:
        with Session(engine) as s:
            return int(s.execute(select(func.count()).select_from(CardChange)).scalar_one())

    before = feed()
    with engine.begin() as conn:  # a change of the runs alone is a change of the served set
        conn.execute(text("UPDATE card SET run_count = 7"))
    assert feed() == before + 2
    with engine.begin() as conn:  # a use is not
        conn.execute(text("UPDATE card SET use_count = use_count + 1"))
    assert feed() == before + 2
