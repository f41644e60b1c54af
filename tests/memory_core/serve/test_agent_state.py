"""An agent's state as it has it: raw error texts find the cards their normalised form finds,
and explain names the variables no card reads."""

from __future__ import annotations

import uuid
from typing import Any

from memory_core.ingest.store import ingest
from memory_core.models.columns import utcnow
from memory_core.replay import parse_all
from memory_core.serve.agent_state import as_ingested, unread
from memory_core.serve.keys import Principal
from memory_core.serve.retrieval import retrieve
from memory_core.serve.schemas import CheckActionRequest, QueryRequest
from memory_core.serve.service import MemoryService
from memory_core.settings import Settings
from memory_core.task_state import error_code, error_signature
from memory_core.validate.stage import validate_drafts
from tests.helpers.data import tau_runs
from tests.helpers.pipeline import retrospect_all
from tests.helpers.serve import add_card

WHO = Principal(key_id=uuid.UUID(int=0), namespace="default", scopes=frozenset({"read"}))


def _with_errors() -> list[dict[str, Any]]:
    """The airline runs in which a tool answered with an error."""
    return [
        r
        for r in tau_runs()
        if any(
            m.get("role") == "tool" and str(m.get("content", "")).startswith("Error")
            for m in r["traj"]
        )
    ]


def _ids(service: MemoryService, state: dict[str, Any]) -> list[uuid.UUID]:
    request = QueryRequest(task_state=state, top_k=20, record_use=False)
    return [h.card.card_id for h in service.query(principal=WHO, request=request).cards]


def test_raw_tool_errors_of_the_airline_runs_find_the_cards_of_their_signature(engine) -> None:
    runs = _with_errors()
    records = [(f"r{i}", r) for i, r in enumerate(runs)]
    report = ingest(engine=engine, records=records, namespace="default", task_type="default")
    assert report.stored == len(runs)
    retrospect_all(engine)
    validate_drafts(engine=engine, reports_dir=None, review_below=0.0)
    service = MemoryService(engine=engine, settings=Settings())
    parsed, _ = parse_all(records, namespace="default", task_type="default")
    raw_errors = {
        (s.tool, s.error, error_signature(s.error, s.args), error_code(s.error))
        for t in parsed
        for s in t.steps
        if s.type == "tool_call" and s.tool and s.error
    }
    assert len(raw_errors) >= 10
    served = 0
    snap = service.snapshots.get("default")
    for tool, raw, signature, code in sorted(raw_errors):
        assert raw != signature  # what the agent got is not what ingest stored
        signed = {"task_type": "default", "last_tool": tool, "last_error": signature}
        expected = _ids(service, {**signed, "last_error_code": code})
        got = _ids(service, {"task_type": "default", "last_tool": tool, "last_error": raw})
        assert got == expected, raw
        # read as sent, the raw text matches none of the cards keyed on the error
        as_sent = retrieve(
            snapshot=snap,
            state={"task_type": "default", "last_tool": tool, "last_error": raw},
            now=utcnow(),
            top_k=20,
        )
        keyed = {
            m.entry.card_id
            for m in retrieve(snapshot=snap, state=signed, now=utcnow(), top_k=20).matches
            if any("last_error" in c.variables for c in m.entry.compiled)
        }
        assert not keyed & {m.entry.card_id for m in as_sent.matches}
        served += bool(keyed)
    # cards keyed on the error itself (recoveries a successful retry confirmed), found from the
    # raw text: two distinct errors of these runs have one
    assert served >= 2


def test_error_like_fields_and_the_check_before_a_call(engine) -> None:
    card = add_card(
        engine,
        namespace="default",
        preconditions=['tool == "pay"', 'error == "card <id> declined after <n> tries"'],
        tool="pay",
    )
    coded = add_card(
        engine,
        namespace="default",
        scenario="rate limited",
        preconditions=['last_error_code == "429"'],
        tool="search",
    )
    service = MemoryService(engine=engine, settings=Settings())
    check = service.check_action(
        principal=WHO,
        request=CheckActionRequest(
            tool="pay", args={}, task_state={"error": "Error: Card X91 declined after 3 tries"}
        ),
    )
    assert [h.card.card_id for h in check.cards] == [card.card_id]
    # the code is derived from the raw text as ingest derives it, unless the agent sent one
    assert _ids(service, {"last_error": "HTTP 429 Too Many Requests"}) == [coded.card_id]
    assert _ids(service, {"last_error": "HTTP 429", "last_error_code": "500"}) == []
    # a state without error texts is passed through as it is (the hot path copies nothing)
    plain = {"tool": "pay", "error_count": 2, "last_error_code": "429"}
    assert as_ingested(plain) is plain
    assert as_ingested({"last_error": 3}) == {"last_error": 3}  # not a text: left to fail


def test_explain_names_the_variables_no_card_reads(engine) -> None:
    add_card(engine, namespace="default", preconditions=['tool == "book_reservation"'])
    service = MemoryService(engine=engine, settings=Settings())
    request = QueryRequest(
        task_state={"tol": "book_reservation", "agent_id": "a1", "mood": "x"},
        explain=True,
        record_use=False,
    )
    result = service.query(principal=WHO, request=request)
    assert result.cards == [] and result.explain is not None
    messages = [u.message for u in result.explain.unread_variables]
    assert messages == [
        "tol: no card reads this; did you mean tool?",
        "agent_id: no card reads this",
        "mood: no card reads this",
    ]
    plain = service.query(principal=WHO, request=request.model_copy(update={"explain": False}))
    assert plain.explain is None
    assert unread(["tool"], {"tool"}) == []


def test_a_check_names_each_warnings_scope_and_puts_the_calls_own_first(engine) -> None:
    tool_wide = add_card(
        engine,
        namespace="default",
        scenario="pay fails with a declined card",
        preconditions=['tool == "pay"'],
        modes=[{"mode": "card declined", "handling": "ask for another card"}],
        confidence=0.9,
        tool="pay",
    )
    keyed = add_card(
        engine,
        namespace="default",
        scenario="pay with a voucher fails",
        preconditions=['tool == "pay"', 'args.method.startsWith("voucher_")'],
        modes=[{"mode": "voucher cannot be used", "handling": "pay by card"}],
        confidence=0.6,
        tool="pay",
    )
    service = MemoryService(engine=engine, settings=Settings())

    def check(args: dict[str, Any]) -> list[tuple[str, str, str]]:
        got = service.check_action(
            principal=WHO, request=CheckActionRequest(tool="pay", args=args, task_state={})
        )
        return [(w["card_id"], w["mode"], w["scope"]) for w in got.warnings]

    # the lesson about calls like this one first, then the tool's reminder, each named
    assert check({"method": "voucher_77"}) == [
        (str(keyed.card_id), "voucher cannot be used", "call"),
        (str(tool_wide.card_id), "card declined", "tool"),
    ]
    assert check({"method": "card_12"}) == [(str(tool_wide.card_id), "card declined", "tool")]
