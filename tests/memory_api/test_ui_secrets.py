"""A run's secrets on the console's trajectory page: redacted for every key, the run as
submitted only to an admin's explicit reveal, which is logged (who, when, which run). HTTP on
both databases, and in real headless chromium."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from memory_api.app import create_app
from memory_core.ingest.store import ingest
from memory_core.models.trajectory import Trajectory
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer
from tests.helpers.ui import csrf_of, signed_in

SECRETS = {
    "url": "Vq7Lm2Pz9x",
    "mysql": "Plum7Tree44",
    "cookie": "a81f2c9e7d3b55",
    "prose": "Sommer2024Wald",
    "bot": "MTI3NjU0MzIxMDk4NzY1NDMyMQ.Gh7kLm.Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7",
}
RUN = {
    "id": "run-with-secrets",
    "messages": [
        {"role": "user", "content": f"Mein Passwort lautet {SECRETS['prose']}, bitte einloggen"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "function": {
                        "name": "shell",
                        "arguments": f'{{"cmd": "mysql -u root -p{SECRETS["mysql"]} shop"}}',
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": f"connected to redis://:{SECRETS['url']}@cache:6379 "
            f"with Cookie: sessionid={SECRETS['cookie']} and bot {SECRETS['bot']}",
        },
        {"role": "assistant", "content": "done"},
    ],
    "outcome": "success",
}


@pytest.fixture
def run_site(settings, engine):
    ingest(engine=engine, records=[("r", RUN)], namespace="team-a", task_type="ops")
    keys = {
        role: create_key(engine=engine, namespace="team-a", scopes=scopes, name=f"Ada {role}")[1]
        for role, scopes in (("read", ["read"]), ("write", ["read", "write"]), ("admin", ["admin"]))
    }
    from sqlmodel import Session, select

    with Session(engine) as s:
        tid = s.exec(select(Trajectory.id)).one()
    svc = MemoryService(engine=engine, settings=settings)
    with LiveServer(create_app(svc)) as server:
        yield server.url, keys, tid


def _visible(page: str) -> list[str]:
    return [k for k, v in SECRETS.items() if v in page]


def test_readers_see_the_run_redacted_and_only_an_admin_reveal_shows_it(run_site, caplog) -> None:
    base, keys, tid = run_site
    for role in ("read", "write"):
        with signed_in(base, keys[role]) as c:
            page = c.get(f"/ui/trajectories/{tid}?step=1").text
            assert _visible(page) == [] and "[REDACTED:" in page, role
            assert 'id="reveal"' not in page  # no reveal offered
            r = c.post(f"/ui/trajectories/{tid}/reveal", data={"csrf": csrf_of(page), "step": "1"})
            assert r.status_code == 403 and _visible(r.text) == [], role
    with signed_in(base, keys["admin"]) as c:
        page = c.get(f"/ui/trajectories/{tid}?step=1").text
        assert _visible(page) == [] and 'id="reveal"' in page
        assert c.post(f"/ui/trajectories/{tid}/reveal", data={"step": "1"}).status_code == 403
        assert len([r for r in caplog.records if r.name == "hindsight.audit"]) == 0
        with caplog.at_level(logging.WARNING, logger="hindsight.audit"):
            r = c.post(f"/ui/trajectories/{tid}/reveal", data={"csrf": csrf_of(page), "step": "1"})
        assert r.status_code == 200 and sorted(_visible(r.text)) == sorted(SECRETS)
        assert r.headers["cache-control"] == "no-store" and 'id="raw-notice"' in r.text
        [line] = [m.getMessage() for m in caplog.records if m.name == "hindsight.audit"]
        assert str(tid) in line and "team-a" in line and "key:" in line and "20" in line
        # the reveal is one page: the next view is redacted again
        assert _visible(c.get(f"/ui/trajectories/{tid}?step=1").text) == []


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")
def test_the_trajectory_page_in_a_browser(run_site) -> None:
    from playwright.sync_api import sync_playwright

    base, keys, tid = run_site
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for role in ("read", "admin"):
                page = browser.new_page()
                page.goto(f"{base}/ui/login")
                page.get_by_label("API key").fill(keys[role])
                page.keyboard.press("Enter")
                page.wait_for_url(lambda url: "/ui/login" not in url)
                page.goto(f"{base}/ui/trajectories/{tid}?step=1")
                text = page.locator("main").inner_text()
                assert _visible(text) == [] and "[REDACTED:" in text, role
                reveal = page.get_by_role("button", name="Reveal the raw run (logged)")
                if role == "read":
                    assert reveal.count() == 0
                    continue
                reveal.click()
                page.wait_for_url(f"**/ui/trajectories/{tid}/reveal")
                text = page.locator("main").inner_text()
                assert sorted(_visible(text)) == sorted(SECRETS)
                assert page.get_by_role("alert").is_visible()
                page.go_back()  # back to the redacted view
                page.reload()
                assert _visible(page.locator("main").inner_text()) == []
        finally:
            browser.close()


def test_console_lists_redact_cards_and_facts_written_before_redaction(run_site, engine) -> None:
    # rows written straight into the table (an old row, another tool): the pages still redact
    from memory_core.db import session_scope
    from memory_core.models.card import Card
    from tests.helpers.serve import add_card

    base, keys, _ = run_site
    add_card(
        engine,
        namespace="team-a",
        scenario=f"log in to redis://:{SECRETS['url']}@cache first",
        modes=[{"mode": f"Cookie: sessionid={SECRETS['cookie']}", "handling": "retry"}],
    )
    for i, value in enumerate(
        (f"Mein Passwort lautet {SECRETS['prose']}", f"bot {SECRETS['bot']}")
    ):
        fact = add_card(engine, namespace="team-a", scenario=f"creds {i}", kind="fact")
        with session_scope(engine) as s:
            row = s.get(Card, fact.card_id)
            row.key, row.value = "ops", value
    with signed_in(base, keys["read"]) as c:
        pages = [
            c.get("/ui/cards").text,
            c.get("/ui/facts").text,
            c.get("/ui/facts", params={"q": "ops"}).text,
            c.get("/ui/overview").text,
        ]
    assert all(r for r in pages)
    assert _visible("\n".join(pages)) == []
    assert "[REDACTED:" in pages[0]
