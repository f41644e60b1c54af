"""The console in real headless Debian chromium (Playwright drives the system browser): sign in,
filter, open a card, try a state, decide in review, redrive, and another namespace's 404.
Screenshots of each page go to docs/ui-*.png (docs/console.md shows them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memory_api.app import create_app
from memory_core.serve.service import MemoryService
from tests.helpers.data import REPO
from tests.helpers.serve import LiveServer
from tests.helpers.ui import seed

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DOCS = REPO / "docs"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="Debian chromium is not installed (.ci/run installs it)"
)


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def site(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    with LiveServer(create_app(svc)) as server:
        yield server.url, seeded, engine.dialect.name == "sqlite"


UNLABELLED = """Array.from(document.querySelectorAll(
  'input:not([type=hidden]), select, textarea, button'))
  .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                && !(el.tagName === 'BUTTON' && el.textContent.trim()))
  .map(el => el.outerHTML)"""


def _shot(page, name: str, keep: bool) -> None:
    # every page shot is also checked: each control has a label a screen reader can say
    assert page.evaluate(UNLABELLED) == [], name
    if keep:  # one set of pictures (the SQLite run's), not one per database
        DOCS.mkdir(exist_ok=True)
        page.screenshot(path=str(DOCS / f"ui-{name}.png"), full_page=True)


def _sign_in(page, base: str, key: str) -> None:
    page.goto(f"{base}/ui/cards")
    assert "/ui/login" in page.url
    page.get_by_label("API key").fill(key)
    page.keyboard.press("Enter")  # keyboard only
    page.wait_for_url(lambda url: "/ui/login" not in url)


def test_curator_walks_the_console(browser, site) -> None:
    base, s, keep = site
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{base}/ui/login")
    _shot(page, "login", keep)
    _sign_in(page, base, s.keys["admin"])
    assert page.get_by_role("link", name="search answers 429 on big pages").is_visible()

    # filter by tool: only the lookup card is left
    page.get_by_label("Tool").fill("lookup")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**tool=lookup**")
    assert page.get_by_role("link", name="lookup needs an order id").is_visible()
    assert page.get_by_role("link", name="search answers 429 on big pages").count() == 0
    page.goto(f"{base}/ui/cards")
    _shot(page, "cards", keep)

    # a card: the variables each precondition reads, evidence opening the trajectory at its step
    page.get_by_role("link", name="search answers 429 on big pages").click()
    assert page.get_by_text("reads retry_count").is_visible()
    _shot(page, "card", keep)
    page.get_by_role("link", name="call 6").click()
    assert page.locator('[aria-current="step"]').inner_text().startswith("step 6")

    # try a state: the card held, its checks, the prompt block
    page.goto(f"{base}/ui/try")
    page.get_by_label("Task state (JSON object)").fill('{"tool": "search", "retry_count": 1}')
    page.get_by_label("Prompt budget (tokens)").fill("120")
    page.get_by_role("button", name="Try it").click()
    assert "Lessons of earlier runs" in page.locator("#prompt").inner_text()
    assert page.get_by_role("link", name="lookup needs an order id").is_visible()  # near miss
    _shot(page, "try", keep)

    # review: reject one with a reason, approve the other; history names the key
    page.goto(f"{base}/ui/review")
    _shot(page, "review", keep)
    page.get_by_label("Reason").first.fill("too vague to act on")
    page.get_by_role("button", name="Reject refunds need a second look").click()
    page.wait_for_url("**done=rejected**")
    page.get_by_role("button", name="Approve cancel twice is refused").click()
    page.wait_for_url("**done=approved**")
    assert page.get_by_text("Nothing waits for review").is_visible()
    page.goto(f"{base}/ui/cards/{s.cards['review'].card_id}")
    assert page.get_by_text("rejected in review: too vague to act on").is_visible()
    assert page.get_by_text("Ada admin (key:").first.is_visible()
    _shot(page, "history", keep)

    # dead letters: redrive
    page.goto(f"{base}/ui/dead-letters")
    _shot(page, "dead-letters", keep)
    page.get_by_label("Select traj-dead").check()
    page.get_by_role("button", name="Redrive selected").click()
    page.wait_for_url("**done=redriven**")
    assert page.get_by_text("No dead letters.").is_visible()

    page.goto(f"{base}/ui/overview")
    assert page.locator("svg title", has_text="Cards by status").count() == 1
    _shot(page, "overview", keep)

    # another namespace's card is a 404 here too
    r = page.goto(f"{base}/ui/cards/{s.cards['foreign'].card_id}")
    assert r is not None and r.status == 404
    assert "team b secret lesson" not in page.content()

    # narrow window: the table scrolls inside its box, the page itself does not
    narrow = browser.new_page(viewport={"width": 390, "height": 800})
    _sign_in(narrow, base, s.keys["read"])
    width = narrow.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    _shot(narrow, "narrow", keep)


def test_offline_docs_render_without_network(browser, site) -> None:
    base, _, _ = site
    page = browser.new_page()
    answered: list[str] = []
    # no internet: anything outside the server is cut off, as on an offline machine
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base) else r.abort())
    page.on("response", lambda r: None if r.url.startswith(base) else answered.append(r.url))
    for path, ready in (("/docs", ".swagger-ui .info"), ("/redoc", "h1")):
        resp = page.goto(f"{base}{path}")
        assert resp is not None and "default-src 'self'" in resp.headers["content-security-policy"]
        page.wait_for_selector(ready, timeout=20_000)
        assert "Hindsight" in page.locator(ready).first.inner_text()
    assert answered == []


def test_a_cards_effect_in_the_browser(browser, site, engine) -> None:
    from tests.memory_core.effects.test_effects_rules import HARMS, HELPS, _counts

    base, s, keep = site
    _counts(engine, s.cards["held"].card_id, HELPS)
    _counts(engine, s.cards["lookup"].card_id, HARMS)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    _sign_in(page, base, s.keys["read"])
    # the list: the effect column, and the filter by verdict
    assert page.get_by_role("cell", name="harms -0.53").is_visible()
    page.get_by_label("Effect").select_option("harms")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**effect=harms**")
    assert page.get_by_role("link", name="lookup needs an order id").is_visible()
    assert page.get_by_role("link", name="search answers 429 on big pages").count() == 0
    _shot(page, "cards-effect", keep)
    # the card: both arms, the difference with its interval, the verdict, not pinned
    page.goto(f"{base}/ui/cards?effect=helps")
    page.get_by_role("link", name="search answers 429 on big pages").click()
    effect = page.get_by_role("region", name="Effect")
    assert effect.get_by_role("row", name="served 40 34 0.850").is_visible()
    assert effect.get_by_role("row", name="withheld 30 10 0.333").is_visible()
    assert "+0.517, 99% interval [+0.214, +0.713]" in effect.inner_text()
    assert effect.get_by_text("not pinned").is_visible()
    assert effect.get_by_role("img", name="interval from +0.214 to +0.713").is_visible()
    effect.scroll_into_view_if_needed()
    _shot(page, "effect", keep)
