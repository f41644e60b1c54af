"""The query log in real headless chromium: agents query and report outcomes over the API;
the curator opens a card's queries from its page, filters by agent key, and sees what each
run was served or withheld and whether it helped (docs/ui-queries.png)."""

from __future__ import annotations

import httpx
import pytest

from memory_api.app import create_app
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from memory_core.settings_groups import HoldoutSettings
from tests.helpers.serve import LiveServer
from tests.helpers.ui import seed
from tests.memory_api.test_ui_browser import _shot, _sign_in, browser, pytestmark  # noqa: F401


@pytest.fixture
def served(settings, engine):
    svc = MemoryService(
        engine=engine, settings=settings.model_copy(update={"holdout": HoldoutSettings(rate=0.3)})
    )
    s = seed(engine)
    _, secret = create_key(engine=engine, namespace="team-a", scopes=["read"], name="planner")
    with LiveServer(create_app(svc)) as server:
        with httpx.Client(
            base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {secret}"}
        ) as agent:
            for i in range(8):
                state = {"tool": "search" if i % 4 else "lookup", "retry_count": i % 3}
                r = agent.post("/v1/cards/query", json={"task_state": state, "run_id": f"r{i}"})
                assert r.status_code == 200, r.text
                outcome = "success" if i % 3 else "failure"
                if i < 6:  # the last two runs reported nothing yet
                    done = agent.post(
                        f"/v1/uses/{r.json()['query_id']}/outcome", json={"outcome": outcome}
                    )
                    assert done.status_code == 200, done.text
        svc.uses.flush()
        yield server.url, s, engine.dialect.name == "sqlite"


def test_what_an_agent_was_served_and_whether_it_helped(browser, served) -> None:  # noqa: F811
    base, s, keep = served
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    _sign_in(page, base, s.keys["read"])
    page.goto(f"{base}/ui/cards/{s.cards['held'].card_id}")
    page.get_by_role("link", name="Its queries in the query log").click()
    page.wait_for_url("**/ui/queries?card=**")
    rows = page.locator("table.queries tbody tr")
    assert rows.count() == 6  # the search runs: served or withheld this card
    assert page.get_by_role("cell", name="failure").count() >= 1
    assert page.get_by_role("cell", name="not reported").count() == 2
    # by agent key: the planner's runs, named, never by secret
    page.goto(f"{base}/ui/queries")
    assert page.locator("table.queries tbody tr").count() == 8
    page.get_by_label("Agent key").select_option(label="planner")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**key=**")
    assert page.locator("table.queries tbody tr").count() == 8
    page.get_by_label("Agent key").select_option(label="Ada read")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**key=**")
    assert page.get_by_text("No served query matches these filters.").is_visible()
    page.goto(f"{base}/ui/queries")
    _shot(page, "queries", keep)
