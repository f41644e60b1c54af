"""Selective warnings: keyed on the argument features their error comes with, and carried to
other tools taking the same argument in the same form (memory_core.retrospect.selective,
memory_core.retrospect.transfer)."""

from __future__ import annotations

import uuid

from sqlalchemy import select as sql_select
from sqlmodel import Session

from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardEvidence
from memory_core.models.trajectory import Trajectory
from memory_core.preconditions import compile_precondition, holds_all, make_context
from memory_core.retrospect.call_features import atoms
from memory_core.retrospect.selective import Call, fisher_tail, select
from tests.helpers.pipeline import card_fingerprint, retrospect_all

LOW = "voucher balance too low"


def _call(error: str, args: dict) -> Call:
    return Call(
        run=uuid.uuid4(),
        outcome="failure" if error else "success",
        step=0,
        error=error,
        features=frozenset(a.expr for a in atoms(args)),
        condition={},
        args=args,
    )


def _atom_of(calls: list[Call]) -> dict:
    return {a.expr: a for c in calls for a in atoms(dict(c.args))}


def test_fisher_tail_is_the_hypergeometric_tail() -> None:
    # 2 failing calls of 4, 2 calls with the feature: both failing ones have it with p 1/6
    assert abs(fisher_tail(2, 0, 2, 2) - 1 / 6) < 1e-12
    assert fisher_tail(0, 5, 3, 9) == 1.0  # at least none: certain


def test_a_feature_that_separates_is_chosen() -> None:
    failing = [_call(LOW, {"method": f"voucher_{i}", "amount": 10 + i}) for i in range(4)]
    others = [_call("", {"method": f"card_{i}", "amount": 5 + i}) for i in range(12)]
    others += [_call("", {"method": "voucher_99", "amount": 7})]  # one voucher paid fine
    calls = failing + others
    sel = select(calls, LOW, _atom_of(calls))
    assert sel is not None
    assert [a.expr for a in sel.atoms] == ['args.method.matches("^voucher_[0-9]+$")']
    assert (sel.failing, sel.failing_with, sel.others, sel.others_with) == (4, 4, 13, 1)
    assert sel.explain()["p_values"][0] < 0.05


def test_a_feature_that_does_not_separate_keeps_the_warning_tool_wide() -> None:
    # the failing calls pay by card as most calls do: nothing tells them apart
    failing = [_call("service busy", {"method": f"card_{i}", "amount": 3}) for i in range(4)]
    others = [_call("", {"method": f"card_{i}", "amount": 4}) for i in range(10)]
    others += [_call("", {"method": f"voucher_{i}", "amount": 4}) for i in range(3)]
    calls = failing + others
    assert select(calls, "service busy", _atom_of(calls)) is None


def test_too_few_failing_calls_choose_nothing() -> None:
    # one run, however clean the split: a feature of one run is likely its own accident
    run = uuid.uuid4()
    failing = [
        Call(run, "failure", i, LOW, frozenset(a.expr for a in atoms({"m": "voucher_1"})), {}, {})
        for i in range(3)
    ]
    others = [_call("", {"m": f"card_{i}"}) for i in range(20)]
    calls = failing + others
    assert select(calls, LOW, {a.expr: a for a in atoms({"m": "voucher_1"})}) is None


def _pay_run(rid: str, method: str, *, fails: bool, tool: str = "pay_order") -> dict:
    call = {"type": "tool_call", "tool": tool, "args": {"order": f"ord_{rid}", "method": method}}
    if fails:
        call["error"] = f"Error: {LOW} for {method}"
    else:
        call["observation"] = "paid"
    return {
        "id": rid,
        "outcome": "failure" if fails else "success",
        "steps": [
            {"type": "message", "role": "user", "text": f"pay order {rid}"},
            {"type": "tool_call", "tool": "get_order", "args": {"order": f"ord_{rid}"},
             "observation": "{}"},
            call,
        ],
    }  # fmt: skip


def test_warning_narrows_and_transfers_to_another_tool(engine) -> None:
    records = [(f"v{i}", _pay_run(f"v{i}", f"voucher_{i}", fails=True)) for i in range(4)]
    records += [(f"c{i}", _pay_run(f"c{i}", f"card_{i}", fails=False)) for i in range(8)]
    ingest(engine=engine, records=records, namespace="default", task_type="default")
    retrospect_all(engine, batch_size=5)  # several batches: each reads every stored run
    with Session(engine) as s:
        cards = s.execute(sql_select(Card)).scalars().all()
        evidence = s.execute(sql_select(CardEvidence)).scalars().all()
    [warning] = [c for c in cards if c.provenance["pattern"] == "pre_call_warning"]
    voucher = 'args.method.matches("^voucher_[0-9]+$")'
    assert warning.preconditions == ['tool == "pay_order"', voucher]
    assert warning.provenance["selective"]["failing_runs"] == 4
    [moved] = [c for c in cards if c.provenance["pattern"] == "transferred_warning"]
    assert moved.provenance["transferred_from"] == ["pay_order"]
    assert "seen on pay_order" in moved.scenario
    assert moved.confidence < warning.confidence  # lower standing at equal evidence
    assert {e.trajectory_id for e in evidence if e.card_id == moved.card_id} == {
        e.trajectory_id for e in evidence if e.card_id == warning.card_id
    }  # explained by the same failing runs
    checks = {
        ("pay_order", "voucher_5"): (True, False),  # the tool's own card, not the transfer
        ("pay_order", "card_5"): (False, False),  # no warning on calls unlike the failing ones
        ("refund_order", "voucher_5"): (False, True),  # another tool, the same argument form
        ("refund_order", "card_5"): (False, False),
    }
    for (tool, method), fires in checks.items():
        state = {"tool": tool, "args": {"order": "ord_x", "method": method}}
        got = tuple(
            holds_all(
                [compile_precondition(p) for p in c.preconditions],
                make_context(state),
                frozenset(state),
            )
            for c in (warning, moved)
        )
        assert got == fires, (tool, method)
    before = card_fingerprint(engine)
    with Session(engine) as s:  # re-process every run: the same cards, no new evidence
        s.execute(Trajectory.__table__.update().values(status="pending"))
        s.commit()
    retrospect_all(engine)
    assert card_fingerprint(engine) == before
