"""The harms verdict across a namespace (Benjamini-Hochberg): the adjustment by hand, the
p-value as the interval inverted, a verdict the per-card test alone would give and the
namespace's adjustment takes back (the same on every surface), a harmful card's way to
review with its p and q in the history, and the memoised tests following every change."""

from __future__ import annotations

import random
from statistics import NormalDist

import pytest
from sqlalchemy import select, update
from sqlmodel import Session

from memory_core.cards.filters import CardFilter
from memory_core.cards.query import get_card, to_public
from memory_core.effects.cards import effects_of, judged_all
from memory_core.effects.estimate import Verdict, estimate, newcombe
from memory_core.effects.fdr import bh_adjust, harms_p, harms_tests, namespace_tests
from memory_core.effects.report import effects_report
from memory_core.models.card import Card, CardVersion
from memory_core.serve.browse import list_page
from memory_core.settings import EffectRules
from tests.helpers.decay import arms, card_row, cards_by_id, decay_at, insert_cards

# served 80/200 against withheld 25/40: the 99% interval lies just below 0 (one-sided p 0.0043)
BORDERLINE = (200, 80, 40, 25)
NULL = (200, 100, 40, 20)  # the same rate in both arms


def test_benjamini_hochberg_by_hand() -> None:
    # m = 10, q = 0.05: the step-up thresholds are 0.005, 0.010, 0.015, ...; p(2) = 0.008 is
    # the last p(j) <= j q / m, so the two smallest are rejected although five are below 0.05
    ps = [0.001, 0.008, 0.039, 0.041, 0.042, 0.060, 0.074, 0.205, 0.212, 0.216]
    want = [0.01, 0.04, 0.084, 0.084, 0.084, 0.1, 0.74 / 7, 0.216, 0.216, 0.216]
    order = list(range(10))
    random.Random(3).shuffle(order)  # the input's order is kept
    q = bh_adjust([ps[i] for i in order])
    assert q == pytest.approx([want[i] for i in order])
    assert sorted(ps[i] for i, qi in zip(order, q, strict=True) if qi <= 0.05) == [0.001, 0.008]
    assert bh_adjust([]) == [] and bh_adjust([0.3]) == [0.3]


def test_the_p_value_is_the_interval_inverted() -> None:
    cases = [(200, 80, 40, 25), (200, 80, 40, 28), (50, 10, 20, 9), (1000, 500, 60, 33)]
    n1s, k1s, n2s, k2s = zip(*cases, strict=True)
    ps = harms_p(k1s, n1s, k2s, n2s)
    for (n1, k1, n2, k2), p in zip(cases, ps, strict=True):
        z = NormalDist().inv_cdf(1 - p)  # at the p-value's z the upper bound is 0
        assert newcombe(k1=k1, n1=n1, k2=k2, n2=n2, z=z)[2] == pytest.approx(0, abs=1e-9)
    assert ps[0] == pytest.approx(0.0043, abs=1e-4)
    # served does no worse: no evidence of harm at all
    assert harms_p([100, 100], [200, 200], [10, 5], [20, 20]) == [1.0, 1.0]
    # too few outcomes in an arm: not tested, and not counted among the namespace's tests
    tests = namespace_tests([(80, 200, 25, 40), (80, 200, 2, 5)], rules=EffectRules())
    assert tests[1] is None and tests[0] is not None and tests[0].tested == 1


def test_a_namespace_of_many_cards_takes_back_a_per_card_harms_verdict(engine) -> None:
    n, k, wn, wk = BORDERLINE
    alone, crowded, *_ = insert_cards(
        engine,
        [
            card_row(1, namespace="alone", **arms(n, k, wn, wk)),
            card_row(1, namespace="crowd", **arms(n, k, wn, wk)),
            *[card_row(1, namespace="crowd", **arms(*NULL)) for _ in range(30)],
        ],
    )
    per_card = EffectRules(fdr=0)
    rules = EffectRules()
    one = estimate(served_uses=n, served_successes=k, withheld_uses=wn, withheld_successes=wk)
    assert one.high is not None and one.high < 0  # the card's own 99% interval says harms
    with engine.connect() as conn:
        tests = harms_tests(conn, rules=rules)
        assert harms_tests(conn, rules=per_card) == {}
    p = tests[alone].p
    assert tests[crowded].p == p and p == pytest.approx(0.0043, abs=1e-4)
    assert (tests[alone].tested, tests[alone].q, tests[alone].harms) == (1, p, True)
    assert tests[crowded].tested == 31 and tests[crowded].q == pytest.approx(31 * p)
    assert not tests[crowded].harms  # 0.134 > 0.02

    verdicts = {}
    for ns, cid in (("alone", alone), ("crowd", crowded)):
        report = effects_report(engine=engine, namespace=ns, rules=rules)
        (r,) = [c for c in report.cards if c.card_id == cid]
        listed = effects_of(engine=engine, namespace=ns, card_ids=[cid], rules=rules)[cid]
        with Session(engine) as s:
            page = get_card(session=s, namespace=ns, card_id=cid, rules=rules)
            row = s.get(Card, cid)
            assert row is not None
            plain = to_public(row)  # as the service hands it to the API and MCP
        api = judged_all([plain], engine=engine, rules=rules)[0]
        harmful = list_page(
            engine=engine, namespace=ns, filters=CardFilter(effect="harms"), after=None
        )
        filtered = cid in {c.card_id for c in harmful.cards}
        assert page.effect is not None and api.effect is not None
        seen = {r.effect.verdict, listed.verdict, page.effect.verdict, api.effect.verdict}
        assert len(seen) == 1, seen  # the same verdict on every surface
        assert filtered == (seen == {Verdict.harms})
        assert page.effect.harms_test == tests[cid]
        verdicts[ns] = seen.pop()
        # the per-card rule (fdr 0) still judges both harmful
        assert effects_report(engine=engine, namespace=ns, rules=per_card).counts["harms"] == 1
    assert verdicts == {"alone": Verdict.harms, "crowd": Verdict.unclear}

    # decay over every namespace adjusts within each: only the lone card goes to review
    report = decay_at(engine)
    assert report.counts["harms"] == 1
    cards = cards_by_id(engine)
    assert cards[alone].status == "review" and cards[crowded].status == "active"
    with Session(engine) as s:
        (h,) = s.execute(select(CardVersion).where(CardVersion.card_id == alone)).scalars()
    assert h.snapshot["rule"] == "harms" and h.reason.startswith("effect: harms, sent to review")
    assert "success 0.400 served (n=200) vs 0.625 withheld (n=40)" in h.reason
    assert f"harms p={p:.3g}, Benjamini-Hochberg q={p:.3g} over 1 cards (fdr 0.02)" in h.reason


def test_per_card_rule_when_fdr_is_zero(engine) -> None:
    n, k, wn, wk = BORDERLINE
    ids = insert_cards(
        engine,
        [
            card_row(1, **arms(n, k, wn, wk)),
            *[card_row(1, **arms(*NULL)) for _ in range(30)],
        ],
    )
    assert decay_at(engine).counts["harms"] == 0  # BH over 31 cards: not harmful
    report = decay_at(engine, effects=EffectRules(fdr=0))
    assert report.counts["harms"] == 1 and cards_by_id(engine)[ids[0]].status == "review"
    with Session(engine) as s:
        (h,) = s.execute(select(CardVersion).where(CardVersion.card_id == ids[0])).scalars()
    assert "Benjamini-Hochberg" not in h.reason and "z=2.576 interval" in h.reason


def test_the_memoised_tests_follow_every_change_of_the_tested_rows(engine) -> None:
    n, k, wn, wk = BORDERLINE
    (cid,) = insert_cards(engine, [card_row(1, namespace="memo", **arms(n, k, wn, wk))])

    def read(rules: EffectRules = EffectRules()) -> dict:
        with engine.connect() as conn:
            return harms_tests(conn, rules=rules, namespaces=["memo"])

    first = read()
    assert first[cid].harms and first[cid].tested == 1
    assert read()[cid] is first[cid]  # the same rows read: the memoised test
    assert read(EffectRules(min_withheld=wn + 1)) == {}  # other rules, other tests
    insert_cards(engine, [card_row(1, namespace="memo", **arms(*NULL)) for _ in range(30)])
    crowded = read()  # a card joined the tested set: tested again
    assert crowded[cid].tested == 31 and not crowded[cid].harms
    with Session(engine) as s:  # the withheld arm falls to the served rate: no harm at all
        s.execute(update(Card).where(Card.card_id == cid).values(withheld_successes=16))
        s.commit()
    assert read()[cid].p == 1.0
