"""The card list's defaults and columns on a real server: experience cards, active and in
review, with their total; rejected cards and facts only when asked (facts on their own page);
tool, support, effect and last-use columns, each sortable on the server and keyset-paged."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from memory_api.app import create_app
from memory_core.db import session_scope
from memory_core.models.card import Card
from memory_core.models.columns import utcnow
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card
from tests.helpers.ui import seed, signed_in

ROW = re.compile(r'/ui/cards/[0-9a-f-]+">(listed \d+)<')


@pytest.fixture
def ui(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    now = utcnow()
    # seven cards whose tool, support, effect and last use each order them differently
    cards = [add_card(engine, scenario=f"listed {i}", tool=f"tool_{(i * 3) % 7}") for i in range(7)]
    with session_scope(engine) as session:
        for i, card in enumerate(cards):
            row = session.get(Card, card.card_id)
            row.run_count = (i * 5) % 7
            row.last_used_at = now - timedelta(hours=(i * 2) % 7) if i != 3 else None
            if i % 2 == 0:  # both arms measured: the difference is (i/10) - 0.5
                row.served_outcomes, row.served_successes = 10, i
                row.withheld_outcomes, row.withheld_successes = 10, 5
            session.add(row)
    add_card(engine, scenario="a rejected guess", status="rejected")
    add_card(engine, scenario="an archived lesson", status="archived")
    add_card(engine, scenario="the project uses postgres", kind="fact")
    with LiveServer(create_app(svc)) as server:
        yield server, seeded


def _walk(c, url: str) -> list[str]:
    seen: list[str] = []
    while url:
        page = c.get(url)
        assert page.status_code == 200, page.text
        seen += ROW.findall(page.text)
        nxt = [ln for ln in page.text.splitlines() if 'rel="next"' in ln]
        url = nxt[0].split('href="')[1].split('"')[0].replace("&amp;", "&") if nxt else ""
    return seen


def test_default_list_is_active_and_review_experience_cards_with_a_total(ui) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["read"]) as c:
        text = c.get("/ui/cards").text
        # 2 active seeded + 2 in review + 7 listed; no rejected, archived card nor fact
        assert "11 active, review" in text
        assert "refunds need a second look" in text and "listed 6" in text
        for hidden in ("a rejected guess", "an archived lesson", "the project uses postgres"):
            assert hidden not in text
        text = c.get("/ui/cards?status=rejected").text
        assert "a rejected guess" in text and "1 rejected" in text and "listed 0" not in text
        every = "&".join(f"status={x}" for x in ("active", "review", "rejected", "archived"))
        assert "13 active, review, rejected, archived" in c.get(f"/ui/cards?{every}").text
        assert "the project uses postgres" not in c.get("/ui/cards?kind=fact").text
        # the columns: tool, support, last use; a header link sorts by each
        row = c.get("/ui/cards?q=listed%201").text
        assert "<code>tool_3</code>" in row and "5 runs" in row
        assert 'href="/ui/cards?q=listed+1&amp;sort=support&amp;order=desc"' in row


@pytest.mark.parametrize(
    ("sort", "order", "expected"),
    [
        ("tool", "asc", [0, 5, 3, 1, 6, 4, 2]),  # tool_0, tool_1, ... tool_6
        ("support", "desc", [4, 1, 5, 2, 6, 3, 0]),  # run_count 6, 5, 4, ...
        ("last_used", "desc", [0, 4, 1, 5, 2, 6, 3]),  # newest use first, never used last
        ("effect", "desc", [6, 4, 2, 0]),  # +0.1, -0.1, -0.3, -0.5, then the unmeasured
    ],
)
def test_each_column_sorts_on_the_server_across_keyset_pages(ui, sort, order, expected) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["read"]) as c:
        seen = _walk(c, f"/ui/cards?q=listed&sort={sort}&order={order}&limit=3")
        assert seen[: len(expected)] == [f"listed {i}" for i in expected]
        assert sorted(seen) == [f"listed {i}" for i in range(7)]
        back = "asc" if order == "desc" else "desc"
        assert _walk(c, f"/ui/cards?q=listed&sort={sort}&order={back}&limit=2") != seen
        assert sorted(_walk(c, f"/ui/cards?q=listed&sort={sort}&order={back}&limit=2")) == sorted(
            seen
        )
        r = c.get("/ui/cards?sort=popularity")
        assert r.status_code == 400 and "sort must be one of" in r.text
