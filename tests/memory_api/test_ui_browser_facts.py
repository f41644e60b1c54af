"""The facts page in real headless chromium: every active fact listed fifty a page, the next
page followed, the list narrowed by the search, a fact opened (docs/ui-facts.png)."""

from __future__ import annotations

from memory_core.facts.store import FactIn, write_fact
from tests.memory_api.test_ui_browser import (  # noqa: F401
    _shot,
    _sign_in,
    browser,
    pytestmark,
    site,
)


def test_facts_are_paged_and_searched_in_the_browser(browser, site, engine) -> None:  # noqa: F811
    base, s, keep = site
    for i in range(52):
        fact = FactIn(key=f"office.{i:02d}", value=f"desk {i:02d} on floor {i % 5}")
        write_fact(engine=engine, namespace="team-a", fact=fact, actor="test")
    db = FactIn(key="db", value="we use PostgreSQL", query="Which database do we use?")
    write_fact(engine=engine, namespace="team-a", fact=db, actor="test")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    _sign_in(page, base, s.keys["read"])
    page.goto(f"{base}/ui/facts")
    heading = page.locator("#all-h")
    total = int(heading.inner_text().split("(")[1].split(")")[0])
    assert total >= 53  # the seeded store's facts and these
    rows = page.locator("table.facts tbody tr")
    assert rows.count() == 50
    first = set(rows.all_inner_texts())
    page.get_by_role("link", name="next page").click()
    page.wait_for_url("**after=**")
    rest = set(page.locator("table.facts tbody tr").all_inner_texts())
    assert len(rest) == total - 50 and not first & rest  # each fact on one page only
    assert page.get_by_role("link", name="first page").is_visible()
    page.goto(f"{base}/ui/facts")
    page.get_by_label("Search facts").fill("postgresql")
    page.keyboard.press("Enter")
    page.wait_for_url("**q=postgresql**")
    assert "(1 containing" in page.locator("#all-h").inner_text()
    listed = page.locator("table.facts tbody tr")
    assert listed.count() == 1
    _shot(page, "facts", keep)
    listed.get_by_role("link", name="we use PostgreSQL").click()
    page.wait_for_url("**/ui/cards/**")
    assert page.get_by_role("heading", name="Which database do we use? we use PostgreSQL").count()
