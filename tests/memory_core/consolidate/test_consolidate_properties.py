"""Property test: random sequences of add / consolidate / state a fact / decay keep the
invariants: one live card per lineage, contiguous versions, no evidence lost, and no
history or archive row without its card (those tables have no foreign key, see 0009)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlmodel import Session, SQLModel

from memory_core.consolidate.stage import consolidate
from memory_core.db import session_scope
from memory_core.decay import DecayParams, run_decay
from memory_core.facts.store import FactIn, write_fact
from memory_core.models.card import Card, CardArchive, CardEvidence, CardVersion
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory
from memory_core.settings import ConsolidateRules, RankingWeights

LIVE = {"draft", "review", "active", "quarantined"}

add = st.tuples(st.just("add"), st.integers(0, 3), st.integers(0, 2), st.integers(1, 2))
fact = st.tuples(st.just("fact"), st.integers(0, 1), st.integers(0, 2))
ops = st.lists(
    st.one_of(
        add, fact, st.just(("consolidate",)), st.tuples(st.just("decay"), st.integers(0, 200))
    ),
    min_size=1,
    max_size=12,
)


def _clear(engine) -> None:
    with engine.begin() as conn:
        for table in reversed(SQLModel.metadata.sorted_tables):
            conn.execute(table.delete())


def _add(engine, lesson: int, variant: int, evidence: int) -> None:
    tool = f"tool{lesson % 2}"
    card_id = uuid.uuid4()
    now = utcnow()
    with session_scope(engine) as s:
        s.add(
            Card(
                card_id=card_id,
                namespace="p",
                scenario=f"lesson {lesson} told another way {variant}",
                preconditions=[f'last_tool == "{tool}"', f'last_error == "e{lesson}"'],
                action_sequence=[{"tool": tool}],
                failure_modes=[{"mode": f"m{variant}"}],
                confidence=0.6,
                status="active",
                signature=uuid.uuid4().hex,
                evidence_count=evidence,
            )
        )
        s.add(
            CardVersion(
                card_id=card_id, version=1, snapshot={}, reason="added", actor="t", created_at=now
            )
        )
        s.flush()
        for i in range(evidence):
            t = Trajectory(
                namespace="p",
                key=uuid.uuid4().hex,
                content_hash="h",
                source_format="steps",
                task_type="default",
            )
            s.add(t)
            s.flush()
            s.add(CardEvidence(card_id=card_id, trajectory_id=t.id, step=i))


def _check(engine) -> None:
    with Session(engine) as s:
        cards = {c.card_id: c for c in s.execute(select(Card)).scalars()}
        versions = defaultdict(list)
        for v in s.execute(select(CardVersion)).scalars():
            versions[v.card_id].append(v.version)
        evidence = defaultdict(set)
        for e in s.execute(select(CardEvidence)).scalars():
            evidence[e.card_id].add((e.trajectory_id, e.step))
        archived = set(s.execute(select(CardArchive.card_id)).scalars())
    assert set(versions) <= set(cards), "history rows without their card"
    assert archived <= set(cards), "archive rows without their card"

    def end(cid: uuid.UUID) -> uuid.UUID:
        seen = set()
        while cards[cid].superseded_by is not None:
            assert cid not in seen, "supersession cycle"
            seen.add(cid)
            cid = cards[cid].superseded_by
        return cid

    for cid, card in cards.items():
        # versions contiguous, the history ends at the card's version
        assert sorted(versions[cid]) == list(range(1, card.version + 1)), (cid, versions[cid])
        last = end(cid)
        if card.status == "superseded":
            assert card.superseded_by is not None and last != cid
        if card.kind == "experience" and last != cid:
            # no evidence lost: the live end of the lineage holds everything its members had
            assert evidence[cid] <= evidence[last]
    # one live card per lesson (merged), and per fact key + query
    live = [c for c in cards.values() if c.status in LIVE]
    keys = [(c.kind, c.key, c.query) for c in live if c.kind == "fact"]
    assert len(keys) == len(set(keys))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=ops)
def test_random_sequences_keep_the_invariants(engine, sequence) -> None:
    _clear(engine)
    clock = utcnow()
    for op in sequence:
        if op[0] == "add":
            _add(engine, *op[1:])
        elif op[0] == "fact":
            write_fact(
                engine=engine,
                namespace="p",
                actor="t",
                fact=FactIn(key=f"k{op[1]}", value=f"v{op[2]}", query="q"),
            )
        elif op[0] == "consolidate":
            consolidate(engine=engine, namespace="p", rules=ConsolidateRules())
            again = consolidate(engine=engine, namespace="p", rules=ConsolidateRules())
            assert again.absorbed == 0  # idempotent
            with Session(engine) as s:
                live = [
                    c
                    for c in s.execute(select(Card)).scalars()
                    if c.status == "active" and c.kind == "experience"
                ]
            lessons = [tuple(c.preconditions) for c in live]
            assert len(lessons) == len(set(lessons))
        else:
            clock += timedelta(days=op[1])
            run_decay(engine=engine, params=DecayParams(now=clock), weights=RankingWeights())
        _check(engine)
