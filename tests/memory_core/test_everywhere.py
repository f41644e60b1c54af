"""Preconditions that hold on every state are refused for every writer, unless the card says
it applies everywhere; cards that pick states are accepted."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlmodel import Session

from memory_core.cards.query import to_public
from memory_core.db import session_scope
from memory_core.errors import InvalidInput, InvalidPrecondition
from memory_core.everywhere import holds_everywhere
from memory_core.ingest.store import ingest
from memory_core.models.card import ActionStep, Card, CardStatus
from memory_core.serve.keys import KeyRing, create_key
from memory_core.serve.prompt_block import prompt_block
from memory_core.serve.schemas import CardIn
from memory_core.serve.store import store_card
from memory_core.validate.review import edit
from memory_core.validate.stage import validate_drafts
from tests.helpers.serve import LiveServer, add_card, keys_for, served_cards

EVERY_STATE = [
    [],
    ["true"],
    ["1 == 1"],
    ["[]"],
    ['task_type != "zzz"'],
    ["step >= 0"],
    ["size(tools_used) >= 0"],
    ["tool == tool"],
    ['tool != "x" || tool == "x"'],
    ["retry_count >= 0", 'last_tool != "never_called"'],
    # disguises: constants, identities, counts compared below zero, a type no state carries
    ['"a" in ["a"]'],
    ["!false"],
    ["size(x) >= 0"],
    ['tool.startsWith("")'],
    ["step + 1 > step"],
    ["retry_count > -1"],
    ["step != -1"],
    ["tool != 1"],
    ['type(tool) == type("")'],
    ["size(args) >= 0"],
]
PICKS = [
    ['tool == "x"'],
    ['task_type == "zzz"'],
    ["step >= 1"],
    ["retry_count < 3"],
    ['"payment" in tools_used'],
    ["error_count > 0"],
    ["last_error_code == 429"],
    ['task_type == "booking"', 'tool == "book_flight"', 'args.cabin == "basic"'],
    ["balance >= 0"],  # an agent's own variable: it may well be negative
    ['task_type != "booking"'],  # a task type the namespace's runs have
    ["retry_count != 0"],
    ["step < 10000000000"],
    ["size(args) > 0"],
]


@pytest.mark.parametrize("expressions", EVERY_STATE, ids=str)
def test_sets_that_hold_on_every_state_are_named(expressions: list[str]) -> None:
    why = holds_everywhere(expressions, used=frozenset())
    assert (why is not None and "applies_everywhere" in why) or "not a boolean" in (why or "")
    for e in expressions:  # the message names the rule it refuses
        assert e.replace(" ", "") in (why or "").replace(" ", "") or not expressions


@pytest.mark.parametrize("expressions", PICKS, ids=str)
def test_sets_that_pick_states_are_accepted(expressions: list[str]) -> None:
    assert holds_everywhere(expressions, used=frozenset({"booking"})) is None


def _key(engine, scopes: list[str]):
    _, secret = create_key(engine=engine, namespace="default", scopes=scopes)
    return KeyRing(engine=engine, cache_s=0).verify(secret)


def _card(pre: list[str], everywhere: bool = False) -> CardIn:
    return CardIn(
        scenario="escalate to a person",
        preconditions=pre,
        action_sequence=[ActionStep(tool="handoff")],
        confidence=0.9,
        applies_everywhere=everywhere,
    )


def test_admin_writes_for_every_state_are_refused_unless_said(engine) -> None:
    admin = _key(engine, ["admin"])
    ingest(
        engine=engine,
        records=[
            (
                "b",
                {
                    "id": "b",
                    "task_type": "booking",
                    "steps": [
                        {
                            "type": "tool_call",
                            "tool": "book_flight",
                            "args": {},
                            "observation": "ok",
                        }
                    ],
                },
            )
        ],
        namespace="default",
        task_type="default",
    )
    for pre in EVERY_STATE:
        with pytest.raises(InvalidPrecondition) as err:
            store_card(engine=engine, principal=admin, card=_card(pre), via="api")
        assert "every" in str(err.value) or "not a boolean" in str(err.value)
    # nothing half-written, and nothing served on the empty state
    with Session(engine) as s:
        assert list(s.execute(select(Card)).scalars()) == []
    assert served_cards(engine, state={}) == []
    # a negation of a value the namespace's runs take picks states; a plain condition too
    for pre in (['task_type != "booking"'], ['tool == "book_flight"']):
        assert store_card(engine=engine, principal=admin, card=_card(pre), via="api")
    # said explicitly, a card for every state is stored, served and shown as such
    card = store_card(engine=engine, principal=admin, card=_card([], everywhere=True), via="mcp")
    assert card.status == "active" and card.provenance["applies_everywhere"] is True
    assert [c.card_id for c in served_cards(engine, state={})] == [card.card_id]
    block = prompt_block([to_public(card)], max_tokens=500)
    assert "applies everywhere" in block


def test_extractor_drafts_for_every_state_are_rejected(engine) -> None:
    from memory_core.cards.writer import write_drafts
    from memory_core.models.drafts import DraftCard

    def draft(pre: list[str], scenario: str) -> DraftCard:
        return DraftCard(
            pattern="llm",
            scenario=scenario,
            preconditions=pre,
            action_sequence=[ActionStep(tool="search")],
            expected_outcome="",
            actual_outcome="",
            failure_modes=[],
            confidence=0.9,
            provenance={"producer": "llm"},
        )

    with session_scope(engine) as session:
        write_drafts(
            session=session,
            namespace="default",
            drafts=[draft(["step >= 0"], "always search"), draft(['tool == "search"'], "search")],
            status=CardStatus.draft,
            provenance={"source": "agent_run"},
        )
    validate_drafts(engine=engine, reports_dir=None)
    with Session(engine) as s:
        status = {c.scenario: c.status for c in s.execute(select(Card)).scalars()}
    assert status == {"always search": "rejected", "search": "active"}


def test_review_edits_cannot_widen_a_card_to_every_state(engine) -> None:
    card = add_card(engine, namespace="default", status="review", preconditions=["step > 2"])
    with pytest.raises(InvalidInput, match="preconditions pick states"):
        edit(
            engine=engine,
            namespace="default",
            card_id=card.card_id,
            changes={"preconditions": ["step >= 0"]},
            actor="key:x",
        )


def test_rest_refuses_a_card_for_every_state_with_the_rule(settings, engine) -> None:
    import httpx

    from memory_api.app import create_app
    from memory_core.serve.service import MemoryService

    keys = keys_for(engine, namespace="default")
    body = {
        "scenario": "always hand off",
        "action_sequence": [{"tool": "handoff"}],
        "confidence": 0.9,
    }
    svc = MemoryService(engine=engine, settings=settings)
    auth = {"Authorization": f"Bearer {keys['admin']}"}
    with (
        LiveServer(create_app(svc)) as server,
        httpx.Client(base_url=server.url, headers=auth) as c,
    ):
        for pre in (["true"], ['task_type != "zzz"'], ["step >= 0"], []):
            r = c.post("/v1/cards", json={**body, "preconditions": pre})
            assert r.status_code == 400, r.text
            assert r.json()["code"] and "applies_everywhere: true" in r.json()["detail"]
        r = c.post("/v1/cards", json={**body, "preconditions": [], "applies_everywhere": True})
        assert r.status_code == 201 and r.json()["provenance"]["applies_everywhere"] is True


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_refuses_a_card_for_every_state_with_the_rule(settings, engine) -> None:
    from mcp import Client

    from memory_api.mcp_server import create_mcp
    from memory_core.serve.service import MemoryService

    svc = MemoryService(engine=engine, settings=settings)
    admin = svc.authenticate(keys_for(engine, namespace="default")["admin"])
    card = {"scenario": "hand off", "action_sequence": [{"tool": "handoff"}], "confidence": 0.9}
    async with Client(create_mcp(svc, principal=admin)) as client:
        bad = await client.call_tool("store_memory_card", {**card, "preconditions": ["1 == 1"]})
        assert bad.is_error and "hold on the empty state" in bad.content[0].text
        ok = await client.call_tool(
            "store_memory_card", {**card, "preconditions": [], "applies_everywhere": True}
        )
        assert not ok.is_error and ok.structured_content["provenance"]["applies_everywhere"]


def test_the_console_shows_a_card_for_every_state_as_such(settings, engine) -> None:
    from memory_api.app import create_app
    from memory_core.serve.service import MemoryService
    from tests.helpers.ui import signed_in

    keys = keys_for(engine, namespace="default")
    admin = _key(engine, ["admin"])
    everywhere = store_card(engine=engine, principal=admin, card=_card([], True), via="api")
    picked = store_card(engine=engine, principal=admin, card=_card(["step > 3"]), via="api")
    app = create_app(MemoryService(engine=engine, settings=settings))
    with LiveServer(app) as server, signed_in(server.url, keys["read"]) as c:
        assert "Applies everywhere" in c.get(f"/ui/cards/{everywhere.card_id}").text
        assert "Applies everywhere" not in c.get(f"/ui/cards/{picked.card_id}").text
