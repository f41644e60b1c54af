"""Overview pictures, navigation by scope and Great Expectations Data Docs served offline,
over HTTP on a real server (the browser's view is in test_ui_browser.py)."""

from __future__ import annotations

import re

import httpx
import pytest

from memory_api.app import create_app
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from memory_core.validate.stage import validate_drafts
from tests.helpers.serve import LiveServer, add_card
from tests.helpers.ui import seed, signed_in

LONG_MODE = "the payment id names a gift card whose balance is not enough for the fare"
# a tag that loads something, and where from
LOADS = re.compile(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"([^\"]+)\"", re.I)


def validated(engine, settings) -> None:
    """Drafts checked by the suite, which writes the Data Docs site under the reports dir."""
    add_card(
        engine,
        scenario="export needs a smaller page",
        status="draft",
        preconditions=['tool == "export"'],
        tool="export",
    )
    # fails "confidence within 0..1"
    add_card(
        engine,
        scenario="refund twice to be sure",
        status="draft",
        confidence=1.5,
        preconditions=['tool == "refund"'],
        tool="refund",
    )
    validate_drafts(engine=engine, reports_dir=settings.reports_dir, registry=None)


@pytest.fixture
def ui(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    with LiveServer(create_app(svc)) as server:
        yield server, seeded


def test_overview_captions_above_whole_labels_and_an_effect_chart(ui, engine) -> None:
    from tests.memory_core.effects.test_effects_rules import HARMS, HELPS, _counts

    server, s = ui
    add_card(engine, scenario="gift card payments", modes=[{"mode": LONG_MODE, "handling": "x"}])
    _counts(engine, s.cards["held"].card_id, HELPS)
    _counts(engine, s.cards["lookup"].card_id, HARMS)
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get("/ui/overview").text
    figures = re.findall(r"<figure.*?</figure>", page, re.S)
    assert len(figures) == 5
    for fig in figures:  # each caption comes before its chart
        assert fig.index("<figcaption") < fig.index("<svg")
    effect = next(f for f in figures if "Effect of active cards" in f)
    lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", effect)
    assert {"helps", "harms", "no effect", "no measurable effect yet"} <= set(lines)
    # 3 active cards: one helps, one harms, one without outcomes yet
    for label, n in (("helps", 1), ("harms", 1), ("no effect", 0), ("no measurable effect yet", 1)):
        assert re.search(
            rf"<tspan[^>]*>{label}</tspan></text>\s*<rect[^>]*></rect>\s*<text[^>]*>{n}<", effect
        ), label
    failures = next(f for f in figures if "Top failure modes" in f)
    row = next(g for g in re.findall(r"<g>.*?</g>", failures, re.S) if "gift card" in g)
    shown = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", row)
    assert len(shown) > 1 and " ".join(shown) == LONG_MODE  # wrapped, not cut
    assert f"<title>{LONG_MODE}: 1</title>" in row  # and whole in the tooltip


def test_navigation_offers_only_what_the_key_may_do(ui, engine) -> None:
    server, s = ui
    writeonly = create_key(engine=engine, namespace="team-a", scopes=["write"], name="w")[1]
    expect = {
        "read": ({"/ui/cards", "/ui/dead-letters", "/ui/overview"}, {"/ui/review", "/ui/keys"}),
        "admin": ({"/ui/cards", "/ui/review", "/ui/keys"}, set()),
    }
    for role, (shown, hidden) in expect.items():
        with signed_in(server.url, s.keys[role]) as c:
            nav = re.search(
                r'<nav aria-label="Console">(.*?)</nav>', c.get("/ui/overview").text, re.S
            )
            assert nav, role
            links = set(re.findall(r'href="([^"]+)"', nav.group(1)))
            assert shown <= links and not hidden & links, (role, links)
    with signed_in(server.url, writeonly) as c:
        refused = c.get("/ui/cards")
        assert refused.status_code == 403
        nav = re.search(r'<nav aria-label="Console">(.*?)</nav>', refused.text, re.S)
        assert nav and set(re.findall(r'href="([^"]+)"', nav.group(1))) == {"/docs"}


def test_data_docs_are_served_with_local_assets_only(ui, engine, settings) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["admin"]) as c:
        r = c.get("/ui/data-docs/index.html")
        assert r.status_code == 404 and "no validation has written Data Docs yet" in r.text
        assert "Data Docs" not in c.get("/ui/overview").text
        validated(engine, settings)
        assert 'href="/ui/data-docs/index.html"' in c.get("/ui/overview").text
        r = c.get("/ui/data-docs")
        assert r.status_code == 303 and r.headers["location"] == "/ui/data-docs/index.html"
        index = c.get("/ui/data-docs/index.html")
        assert index.status_code == 200
        assert "default-src 'self'" in index.headers["content-security-policy"]
        pages = ["/ui/data-docs/index.html"] + [
            "/ui/data-docs/" + p
            for p in re.findall(r"'((?:validations|expectations)/[^']+\.html)'", index.text)
        ]
        assert len(pages) >= 3, "the index names the suite and the validation run"
        assets: set[str] = set()
        for p in pages:
            text = c.get(p).text
            loads = LOADS.findall(text)
            outside = [u for u in loads if re.match(r"(https?:)?//", u)]
            assert loads and not outside, (p, outside)
            base = p.rsplit("/", 1)[0]
            assets |= {u if u.startswith("/") else f"{base}/{u}" for u in loads}
        assert "/ui/static/datadocs/bootstrap-table.min.js" in assets
        for a in sorted(assets):
            assert c.get(a).status_code == 200, a
        # nothing outside the site's folder
        assert c.get("/ui/data-docs/..%2F..%2Fhindsight.db").status_code == 404
        assert c.get("/ui/data-docs/%2Fetc%2Fpasswd").status_code == 404
    with signed_in(server.url, s.keys["other"]) as c:  # team-b's admin: its own site, none yet
        assert c.get("/ui/data-docs/index.html").status_code == 404
    with signed_in(server.url, s.keys["read"]) as c:
        assert c.get("/ui/data-docs/index.html").status_code == 403
        assert "Data Docs" not in c.get("/ui/overview").text
    assert httpx.get(f"{server.url}/ui/data-docs/index.html").status_code == 303  # sign in
