"""A card's backtest on its page: the API's card, the console's card page in headless
chromium and `hindsight cards show`, on SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from memory_api.app import create_app
from memory_core.backtest.stage import run_gate
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from memory_core.settings import GateSettings
from tests.helpers.cli import hindsight
from tests.helpers.gate import T0, add_card, failing, later
from tests.helpers.serve import LiveServer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture
def held(engine):
    """A card of one task whose warnings were wrong on 6 later runs: held in review."""
    card = add_card(
        engine,
        runs=[failing(engine, "a", "id:a", T0)],
        preconditions=['tool == "reserve"', 'args.seat == "1a"'],
        at=T0,
    )
    later(engine, 6, start=T0 + timedelta(days=1), right=False, prefix="later-run-")
    run_gate(engine=engine, rules=GateSettings(), now=T0 + timedelta(days=2))
    return card


def test_the_api_card_and_the_cli_show_the_backtest(settings, engine, env_for, held) -> None:
    secret = create_key(engine=engine, namespace="default", scopes=["read"])[1]
    with LiveServer(create_app(MemoryService(engine=engine, settings=settings))) as server:
        r = httpx.get(
            f"{server.url}/v1/cards/{held}", headers={"Authorization": f"Bearer {secret}"}
        )
    assert r.status_code == 200, r.text
    card = r.json()
    b = card["backtest"]
    assert card["status"] == "review"
    assert (b["groups"], b["checked"], b["fired"], b["right"], b["wrong"]) == (1, 6, 6, 0, 6)
    assert b["serve"] is False and b["measured"] is True and b["low"] == 0.0
    assert "not mostly right" in b["reason"] and len(b["runs"]) == 6
    shown = hindsight(env_for, "cards", "show", str(held)).stdout
    assert "backtest: waits in review: warnings not mostly right" in shown
    assert "6 later runs checked, 6 warnings fired, 0 right, 6 wrong" in shown
    assert "later-run-5" in shown


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")
def test_the_console_card_page_shows_the_backtest(settings, engine, held) -> None:
    from playwright.sync_api import sync_playwright

    secret = create_key(engine=engine, namespace="default", scopes=["read"], name="Ada")[1]
    with (
        LiveServer(create_app(MemoryService(engine=engine, settings=settings))) as server,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{server.url}/ui/login")
        page.get_by_label("API key").fill(secret)
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: "/ui/login" not in url)
        page.goto(f"{server.url}/ui/cards/{held}")
        section = page.locator("section", has=page.get_by_role("heading", name="Backtest"))
        text = section.inner_text()
        assert "waits in review" in text and "not mostly right" in text
        assert "6 warnings fired · 0 right · 6 wrong" in text
        link = section.get_by_role("link", name="later-run-5 call 0")
        assert link.is_visible()
        link.click()
        page.wait_for_url("**/ui/trajectories/**")
        browser.close()
