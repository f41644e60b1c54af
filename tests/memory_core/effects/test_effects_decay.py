"""Effect-aware decay: a harmful card goes to review and its history says why; a card with no
effect fades once a night; a helpful card survives the cap; thin evidence changes nothing."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import select
from sqlmodel import Session

from memory_core.effects.estimate import estimate
from memory_core.effects.sql import effect_sql
from memory_core.models.card import CardVersion
from memory_core.settings import EffectRules
from tests.helpers.decay import NOW, arms, card_row, cards_by_id, decay_at, insert_cards


def _history(engine, cid) -> list[CardVersion]:
    with Session(engine) as s:
        q = select(CardVersion).where(CardVersion.card_id == cid).order_by(CardVersion.version)
        return list(s.execute(q).scalars())


def test_a_harmful_card_goes_to_review_and_its_history_says_why(engine) -> None:
    harmful, thin, fine = insert_cards(
        engine,
        [
            card_row(1, **arms(200, 80, 40, 28)),  # 0.40 served vs 0.70 withheld
            card_row(1, **arms(200, 80, 5, 4)),  # the same rates, too few withheld
            card_row(1, **arms(200, 140, 40, 28)),  # no difference, wide interval
        ],
    )
    report = decay_at(engine)
    assert report.counts["harms"] == 1 and report.counts["fade"] == 0
    cards = cards_by_id(engine)
    assert cards[harmful].status == "review" and cards[harmful].version == 2
    assert cards[thin].status == "active" and cards[fine].status == "active"
    (h,) = _history(engine, harmful)
    assert h.actor == "decay" and h.snapshot["rule"] == "harms"
    assert h.reason.startswith("effect: harms, sent to review: ")
    e = estimate(served_uses=200, served_successes=80, withheld_uses=40, withheld_successes=28)
    assert e.high is not None and e.low is not None
    assert "success 0.400 served (n=200) vs 0.700 withheld (n=40)" in h.reason
    assert f"difference -0.300, z=2.576 interval [{e.low:.3f}, {e.high:.3f}]" in h.reason
    assert decay_at(engine).total == 0  # out of the active set: nothing more to do


def test_without_effect_awareness_only_the_feedback_rule_remains(engine) -> None:
    (cid,) = insert_cards(engine, [card_row(1, **arms(200, 80, 40, 28))])
    off = EffectRules(aware=False)
    assert decay_at(engine, effects=off).total == 0
    assert cards_by_id(engine)[cid].status == "active"


def test_no_effect_fades_once_a_night_and_carries_the_time_decay(engine) -> None:
    null, idle_null = insert_cards(
        engine,
        [
            card_row(1, **arms(3000, 1500, 3000, 1500)),
            # used long ago (time decay tier 1 is due) and measured to do nothing
            {
                **card_row(40),
                **arms(3000, 1500, 3000, 1510),
                "last_used_at": NOW.replace(year=2026, month=4, day=1),
            },
        ],
    )
    report = decay_at(engine)
    assert report.counts["fade"] == 2 and report.counts["decay"] == 0
    cards = cards_by_id(engine)
    assert cards[null].confidence == pytest.approx(0.8 * 0.85)
    assert cards[idle_null].confidence == pytest.approx(0.8 * 0.9 * 0.85)
    assert cards[idle_null].decay_tier == 1 and cards[null].effect_faded_at == NOW
    (h,) = _history(engine, idle_null)
    assert h.reason.startswith("time decay: unused 30+ days") and "effect: none beyond" in h.reason
    assert decay_at(engine).total == 0  # the same night again: nothing
    from datetime import timedelta

    from memory_core.decay import DecayParams, run_decay
    from tests.helpers.decay import W

    later = run_decay(engine=engine, params=DecayParams(now=NOW + timedelta(days=1)), weights=W)
    assert later.counts["fade"] == 2


def test_a_card_proven_to_help_survives_the_cap(engine) -> None:
    helpful, *others = insert_cards(
        engine,
        [
            card_row(1, confidence=0.1, **arms(200, 160, 40, 12)),  # low score, helps
            *[card_row(1, confidence=0.9) for _ in range(3)],
        ],
    )
    report = decay_at(engine, cap=3)
    assert report.counts["cap"] == 1
    cards = cards_by_id(engine)
    assert cards[helpful].status == "active"
    assert sum(cards[c].status == "archived" for c in others) == 1


def test_the_sql_estimate_equals_the_python_one(engine) -> None:
    rules = EffectRules(min_served=1, min_withheld=1)
    cases = list(itertools.product([1, 7, 40], [0, 3, 40], [2, 20], [0, 1, 20]))
    cases = [(n1, min(k1, n1), n2, min(k2, n2)) for n1, k1, n2, k2 in cases]
    from sqlalchemy import literal

    with engine.connect() as conn:
        for n1, k1, n2, k2 in cases:
            e = effect_sql(
                served=literal(n1),
                served_ok=literal(k1),
                withheld=literal(n2),
                withheld_ok=literal(k2),
                rules=rules,
            )
            low, high = conn.execute(select(e.low, e.high)).one()
            py = estimate(
                served_uses=n1,
                served_successes=k1,
                withheld_uses=n2,
                withheld_successes=k2,
                rules=rules,
            )
            assert (low, high) == (
                pytest.approx(py.low, abs=1e-9),
                pytest.approx(py.high, abs=1e-9),
            )


def test_cli_reports_effects_shows_them_on_a_card_and_pins(env_for, engine, tmp_path) -> None:
    import json

    from tests.helpers.cli import hindsight

    harmful, helpful = insert_cards(
        engine,
        [card_row(1, **arms(200, 80, 40, 28)), card_row(1, **arms(200, 160, 40, 12))],
    )
    env = env_for
    out = json.loads(hindsight(env, "effects", "report", "--format", "json").stdout)
    assert out["counts"] == {"helps": 1, "harms": 1, "no_effect": 0, "unclear": 0}
    assert [c["card_id"] for c in out["cards"]] == [str(harmful), str(helpful)]
    png = tmp_path / "effects.png"
    text = hindsight(env, "effects", "report", "--plot", str(png)).stdout
    assert "harms" in text and "80/200" in text and png.stat().st_size > 1000
    shown = hindsight(env, "cards", "show", str(harmful)).stdout
    assert "harms -0.30" in shown and "n=200/40" in shown
    assert "helps +0.50" in hindsight(env, "cards", "list").stdout
    hindsight(env, "cards", "pin", str(harmful))
    assert cards_by_id(engine)[harmful].pinned
    hindsight(env, "cards", "pin", str(harmful), "--off")
    assert not cards_by_id(engine)[harmful].pinned
