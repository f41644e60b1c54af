"""The nightly runs the serving gate after consolidate: every live lesson gets its figures, the
lessons it does not serve wait in review with a reason, and a second night changes nothing;
on the tau-bench runs, lessons seen across tasks stay served. SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlmodel import Session

from flows.nightly import nightly
from flows.params import NightlyParams
from memory_core.models.backtest import CardBacktest
from memory_core.models.card import Card, CardVersion
from tests.helpers.data import REPO, tau_path


def _state(engine) -> tuple:
    with Session(engine) as s:
        cards = sorted(
            (str(c.card_id), c.status, c.version)
            for c in s.execute(select(Card).where(Card.kind == "experience")).scalars()
        )
        rows = sorted(
            (str(b.card_id), b.serve, b.reason, b.computed_at)
            for b in s.execute(select(CardBacktest)).scalars()
        )
        gate_versions = s.execute(
            select(func.count()).select_from(CardVersion).where(CardVersion.actor == "gate")
        ).scalar_one()
    return cards, rows, gate_versions


def test_the_nightly_gates_every_lesson_and_a_second_night_changes_nothing(
    flow_env, engine
) -> None:
    params = NightlyParams(input=[str(REPO / "examples"), str(tau_path())])
    first = nightly(params)
    assert not first.outcome.failures
    with Session(engine) as s:
        live = {
            c.card_id: c
            for c in s.execute(
                select(Card).where(Card.kind == "experience", Card.status.in_(["active", "review"]))
            ).scalars()
        }
        gated = {b.card_id: b for b in s.execute(select(CardBacktest)).scalars()}
        held = s.execute(select(CardVersion).where(CardVersion.actor == "gate")).scalars().all()
    assert set(gated) == set(live)
    active = [c for c in live.values() if c.status == "active"]
    # lessons seen across tasks stay served: the runs do not lose every lesson; a lesson of one
    # task is served only as one of a tool's known errors (a card naming the tool alone)
    assert active and all(gated[c.card_id].serve for c in active)
    assert any(gated[c.card_id].groups >= 2 for c in active)
    assert all(
        gated[c.card_id].groups >= 2 or "one of the tool's known errors" in gated[c.card_id].reason
        for c in active
    )
    assert held and all(v.snapshot["status"] == "review" for v in held)
    assert all(not gated[v.card_id].serve for v in held)
    assert any("supported by 1 task group" in v.reason for v in held)
    before = _state(engine)
    second = nightly(params)
    assert not second.outcome.failures
    assert _state(engine) == before
