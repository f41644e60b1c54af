"""A failure streak with the holdout on sends a card to review only once the card is measured;
without the holdout the plain rule stays, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlmodel import Session

from memory_core.decay import record_feedback
from memory_core.decay.feedback import streak_rule
from memory_core.models.card import Card, CardVersion
from memory_core.settings import Settings
from tests.helpers.decay import NOW, arms, card_row, cards_by_id, insert_cards

ON = Settings(holdout={"rate": 0.05})


def _fail(engine, cid, times: int, measure):
    return [
        record_feedback(
            engine=engine,
            namespace="default",
            card_id=cid,
            outcome="failure",
            measure=measure,
            now=NOW,
        )
        for _ in range(times)
    ]


def test_the_streak_rule_is_measured_only_with_the_holdout_on() -> None:
    assert streak_rule(Settings(holdout={"rate": 0.0}), "default") is None
    assert streak_rule(Settings(holdout={"rate": 0.0, "rates": {"team": 0.1}}), "team")
    rule = streak_rule(ON, "default")
    assert rule is not None and rule.min_withheld == 20
    custom = Settings(holdout={"rate": 0.05}, review={"streak_min_withheld": 7})
    assert streak_rule(custom, "default").min_withheld == 7  # type: ignore[union-attr]


def test_an_unmeasured_card_stays_served_through_a_streak_until_withheld_outcomes_exist(
    engine,
) -> None:
    (cid,) = insert_cards(engine, [card_row(1, **arms(40, 34, 2, 2))])
    rule = streak_rule(ON, "default")
    held = _fail(engine, cid, 4, rule)
    assert [f.status for f in held] == ["active"] * 4
    assert [f.held_for_measure for f in held] == [False, False, True, True]
    with Session(engine) as s:
        last = (
            s.execute(
                select(CardVersion).where(CardVersion.card_id == cid).order_by(CardVersion.version)
            )
            .scalars()
            .all()[-1]
        )
    assert "kept in service until measured" in last.reason and "withheld 2/2" in last.reason
    # enough withheld outcomes arrive (other runs' reports): the streak already past 3 counts
    with Session(engine) as s:
        s.execute(update(Card).where(Card.card_id == cid).values(withheld_outcomes=20))
        s.commit()
    (fb,) = _fail(engine, cid, 1, rule)
    assert fb.sent_to_review and fb.status == "review" and fb.consecutive_failures == 5
    assert cards_by_id(engine)[cid].status == "review"


def test_a_card_on_the_harmful_side_goes_to_review_at_the_streak(engine) -> None:
    # served 2 of 12 succeeded, withheld 5 of 5: the 99% interval of the difference is below 0
    (cid,) = insert_cards(engine, [card_row(1, **arms(12, 2, 5, 5))])
    out = _fail(engine, cid, 3, streak_rule(ON, "default"))
    assert [f.status for f in out] == ["active", "active", "review"]
    assert not any(f.held_for_measure for f in out)


def test_without_the_holdout_three_failures_in_a_row_still_send_to_review(engine) -> None:
    (cid,) = insert_cards(engine, [card_row(1, **arms(40, 34, 0, 0))])
    out = _fail(engine, cid, 3, streak_rule(Settings(holdout={"rate": 0.0}), "default"))
    assert [f.status for f in out] == ["active", "active", "review"]
