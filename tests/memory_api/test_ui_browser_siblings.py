"""A card's siblings in real headless chromium: three alike cards told apart by their
conditions; the curator merges one and rejects another (docs/ui-siblings.png)."""

from __future__ import annotations

import pytest

from memory_api.app import create_app
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer
from tests.helpers.ui import seed
from tests.memory_api.test_ui_browser import _shot, _sign_in, browser, pytestmark  # noqa: F401
from tests.memory_api.test_ui_siblings import gift_cards


@pytest.fixture
def site(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    s = seed(engine)
    cards = gift_cards(engine)
    with LiveServer(create_app(svc)) as server:
        yield server.url, s, cards, engine.dialect.name == "sqlite"


def test_curator_merges_and_rejects_siblings(browser, site) -> None:  # noqa: F811
    base, s, (plain, business, gift), keep = site
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    _sign_in(page, base, s.keys["admin"])
    page.goto(f"{base}/ui/cards/{plain.card_id}")
    region = page.get_by_role("region", name="Siblings (2)")
    assert region.get_by_text('cabin == "business"').is_visible()
    region.scroll_into_view_if_needed()
    _shot(page, "siblings", keep)
    page.get_by_role("button", name=f"Merge {str(gift.card_id)[:8]} into this card").click()
    page.wait_for_url("**done=merged**")
    assert page.get_by_text("the sibling was merged into this card").is_visible()
    page.get_by_label("Reason").fill("the cabin does not change the fix")
    page.get_by_role("button", name=f"Reject {str(business.card_id)[:8]}").click()
    page.wait_for_url("**done=sibling-rejected**")
    assert page.get_by_role("region", name="Siblings (0)").is_visible()
