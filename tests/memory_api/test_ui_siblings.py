"""A card's siblings on a real server: near-identical live cards listed with the conditions that
tell them apart; an admin merges one into the card (consolidation's apply step) or rejects one
with a reason; read keys, forms without CSRF and other namespaces are refused."""

from __future__ import annotations

import html

import pytest

from memory_api.app import create_app
from memory_core.db import read_session
from memory_core.models.card import Card
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card
from tests.helpers.ui import csrf_of, seed, signed_in

GIFT = [{"mode": "gift card balance is not enough", "handling": "ask for a second payment"}]


def gift_cards(engine, namespace: str = "team-a") -> list:
    """Three active cards titled alike, told apart only by their preconditions."""
    return [
        add_card(
            engine,
            namespace=namespace,
            scenario=f"pay with a gift card: the gift card balance is not enough{tail}",
            preconditions=['tool == "book"', *pre],
            tool="book",
            modes=GIFT,
            confidence=0.7 - i / 10,
        )
        for i, (tail, pre) in enumerate(
            [
                ("", []),
                (" (business)", ['cabin == "business"']),
                (" (gift id)", ['payment_id.startsWith("gift_card_")']),
            ]
        )
    ]


@pytest.fixture
def ui(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    s = seed(engine)
    cards = gift_cards(engine)
    add_card(engine, scenario="an unrelated lesson on booking", tool="book", modes=[])
    with LiveServer(create_app(svc)) as server:
        yield server, s, cards


def _status(engine, card_id) -> str:
    with read_session(engine) as session:
        return session.get(Card, card_id).status


def test_siblings_show_what_tells_them_apart_and_merge_or_reject(ui, engine) -> None:
    server, s, (plain, business, gift) = ui
    with signed_in(server.url, s.keys["read"]) as c:
        page = html.unescape(c.get(f"/ui/cards/{plain.card_id}").text)
        assert "Siblings (2)" in page and "unrelated lesson" not in page.split("sib-h")[1][:4000]
        assert "same tool book and failure signature" in page
        assert '<code>cabin == "business"</code>' in page
        assert '<code>payment_id.startsWith("gift_card_")</code>' in page
        assert "Merge into this card" not in page  # a read key sees, does not act
        token = csrf_of(c.get("/ui/try").text)
        r = c.post(f"/ui/cards/{plain.card_id}/siblings/{gift.card_id}/merge", data={"csrf": token})
        assert r.status_code == 403 and _status(engine, gift.card_id) == "active"
    with signed_in(server.url, s.keys["admin"]) as c:
        page = c.get(f"/ui/cards/{plain.card_id}").text
        assert page.count("Merge into this card") == 2
        token = csrf_of(page)
        url = f"/ui/cards/{plain.card_id}/siblings/{gift.card_id}"
        assert c.post(f"{url}/merge", data={}).status_code == 403  # no CSRF token
        r = c.post(f"{url}/merge", data={"csrf": token})
        assert r.status_code == 303 and "done=merged" in r.headers["location"]
        assert _status(engine, gift.card_id) == "superseded"
        page = c.get(r.headers["location"]).text
        assert "the sibling was merged into this card" in page and "Siblings (1)" in page
        assert "Ada admin (key:" in page and "as siblings" in page  # the version names who
        url = f"/ui/cards/{plain.card_id}/siblings/{business.card_id}"
        r = c.post(f"{url}/reject", data={"csrf": token, "reason": " "})
        assert r.status_code == 400 and "needs a reason" in r.text
        r = c.post(f"{url}/reject", data={"csrf": token, "reason": "the cabin does not matter"})
        assert r.status_code == 303 and _status(engine, business.card_id) == "rejected"
        page = c.get(f"/ui/cards/{business.card_id}").text
        assert "rejected as a sibling of" in page and "the cabin does not matter" in page
        assert "Siblings (0)" in c.get(f"/ui/cards/{plain.card_id}").text
        # a merge with a card no longer active is refused by name
        r = c.post(f"{url}/merge", data={"csrf": token})
        assert r.status_code == 400 and "only active cards merge" in r.text
        r = c.post(
            f"/ui/cards/{plain.card_id}/siblings/{plain.card_id}/reject",
            data={"csrf": token, "reason": "x"},
        )
        assert r.status_code == 400 and "not its own sibling" in r.text
    # another namespace's admin: neither card is found
    with signed_in(server.url, s.keys["other"]) as c:
        token = csrf_of(c.get("/ui/try").text)
        r = c.post(
            f"/ui/cards/{plain.card_id}/siblings/{business.card_id}/reject",
            data={"csrf": token, "reason": "theirs"},
        )
        assert r.status_code == 404
