"""The console over HTTP on a real server: sign-in, CSRF, namespaces, filters, keyset pages."""

from __future__ import annotations

import html
import re
import uuid
from datetime import timedelta

import httpx
import pytest

from memory_api.app import create_app
from memory_api.ui.session import COOKIE, Sessions
from memory_core.db import session_scope
from memory_core.facts.store import FactIn, write_fact
from memory_core.models.card import Card, FactStanding
from memory_core.models.columns import utcnow
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card
from tests.helpers.ui import csrf_of, seed, signed_in


@pytest.fixture
def ui(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    with LiveServer(create_app(svc)) as server:
        yield server, seeded


def test_sign_in_sets_a_strict_httponly_expiring_cookie_and_bad_keys_are_refused(ui) -> None:
    server, s = ui
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.get("/ui/cards")
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login?next=")
        # a sign-in posted from elsewhere carries no sign-in cookie: refused before the key
        r = c.post("/ui/login", data={"key": s.keys["read"], "csrf": "guess"})
        assert r.status_code == 403 and "hs_console" not in r.headers.get("set-cookie", "")
        token = csrf_of(c.get("/ui/login").text)
        r = c.post("/ui/login", data={"key": "hs_not-a-key", "next": "/ui/cards", "csrf": token})
        assert r.status_code == 401 and "unknown or revoked" in r.text
        token = csrf_of(r.text)
        r = c.post(
            "/ui/login",
            data={"key": s.keys["read"], "next": "https://evil.example/", "csrf": token},
        )
        assert r.status_code == 303 and r.headers["location"] == "/ui/cards"
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "max-age=" in cookie
        assert s.keys["read"] not in r.headers["set-cookie"]  # the secret never goes back
        page = c.get("/ui/cards")
        assert page.status_code == 200 and "search answers 429" in page.text
        # a forged cookie (another signature) is no session
        name, value = next(iter(c.cookies.items()))
        body, mac = value.rsplit(".", 1)
        forged = f"{body}.{'1' if mac[0] == '0' else '0'}{mac[1:]}"  # always another signature
        c.cookies.set(name, forged, path="/ui")
        assert c.get("/ui/cards").status_code == 303


def test_another_namespace_is_invisible_and_its_card_answers_404(ui) -> None:
    server, s = ui
    foreign = s.cards["foreign"].card_id
    with signed_in(server.url, s.keys["admin"]) as c:
        assert "team b secret lesson" not in c.get("/ui/cards").text
        r = c.get(f"/ui/cards/{foreign}")
        assert r.status_code == 404 and "team b secret lesson" not in r.text
        assert c.get(f"/ui/trajectories/{s.trajectory}?step=2").status_code == 200
    with signed_in(server.url, s.keys["other"]) as c:
        assert c.get(f"/ui/cards/{s.cards['held'].card_id}").status_code == 404
        assert c.get(f"/ui/trajectories/{s.trajectory}?step=2").status_code == 404
        page = c.get("/ui/cards").text
        assert "team b secret lesson" in page and "search answers 429" not in page
        # deciding on team-a's card from team-b: not found, and nothing changed
        token = csrf_of(c.get("/ui/review").text)
        r = c.post(
            f"/ui/review/{s.cards['review'].card_id}/decide",
            data={"csrf": token, "decision": "approve"},
        )
        assert r.status_code == 404
    with signed_in(server.url, s.keys["admin"]) as c:
        assert "refunds need a second look" in c.get("/ui/review").text


def test_forms_without_the_session_csrf_token_are_refused(ui) -> None:
    server, s = ui
    card = s.cards["review"].card_id
    with signed_in(server.url, s.keys["admin"]) as c:
        for token in (None, "0" * 32):
            data = {"decision": "approve"} | ({"csrf": token} if token else {})
            r = c.post(f"/ui/review/{card}/decide", data=data)
            assert r.status_code == 403 and "CSRF" in r.text
        assert "refunds need a second look" in c.get("/ui/review").text  # still waiting
        # another session's token is not this session's
        with signed_in(server.url, s.keys["admin"]) as other:
            theirs = csrf_of(other.get("/ui/review").text)
        assert theirs != csrf_of(c.get("/ui/review").text)
        r = c.post(f"/ui/review/{card}/decide", data={"csrf": theirs, "decision": "approve"})
        assert r.status_code == 403


def test_read_keys_see_but_do_not_decide(ui) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["read"]) as c:
        token = csrf_of(c.get("/ui/try").text)
        # the navigation offers only what the key may do; a refusal's page keeps it
        assert 'href="/ui/review"' not in c.get("/ui/cards").text
        refused = c.get("/ui/review")
        assert refused.status_code == 403 and 'aria-label="Console"' in refused.text
        assert 'href="/ui/review"' not in refused.text
        r = c.post(
            f"/ui/review/{s.cards['review'].card_id}/decide",
            data={"csrf": token, "decision": "approve"},
        )
        assert r.status_code == 403
        r = c.post(f"/ui/dead-letters/{s.dead_letter}/redrive", data={"csrf": token})
        assert r.status_code == 403
        assert "Redrive" not in c.get("/ui/dead-letters").text


def test_filters_and_keyset_pages_walk_every_card_once(ui, engine) -> None:
    server, s = ui
    for i in range(23):
        add_card(engine, scenario=f"bulk card {i:02d}", confidence=0.3 + i / 100, tool="bulk")
    with signed_in(server.url, s.keys["read"]) as c:
        seen: list[str] = []
        url = "/ui/cards?q=bulk&sort=confidence&order=asc&limit=5"
        pages = 0
        while url:
            page = c.get(url)
            assert page.status_code == 200
            seen += re.findall(r'/ui/cards/[0-9a-f-]+">(bulk card \d+)<', page.text)
            nxt = [ln for ln in page.text.splitlines() if 'rel="next"' in ln]
            url = nxt[0].split('href="')[1].split('"')[0].replace("&amp;", "&") if nxt else ""
            pages += 1
        assert pages == 5 and seen == [f"bulk card {i:02d}" for i in range(23)]
        text = c.get("/ui/cards?tool=lookup").text
        assert "lookup needs an order id" in text and "search answers 429" not in text
        text = c.get("/ui/cards?status=review").text
        assert "refunds need a second look" in text and "lookup needs" not in text
        text = c.get("/ui/cards?min_confidence=0.5&max_confidence=0.9&q=o").text
        assert "search answers 429" in text and "lookup needs" not in text
        r = c.get("/ui/cards?origin=gossip")
        assert r.status_code == 400 and "origin must be one of" in r.text
    add_card(engine, scenario="an operator's own lesson", origin="operator")
    add_card(engine, scenario="seen in a tool error", origin="observed")
    with signed_in(server.url, s.keys["read"]) as c:
        text = c.get("/ui/cards?origin=operator").text
        assert "an operator&#39;s own lesson" in text and "seen in a tool error" not in text
        r = c.get("/ui/cards?min_confidence=lots")
        assert r.status_code == 400 and "min_confidence" in r.text
        assert c.get("/ui/cards?after=garbage").status_code == 400


def test_card_page_shows_variables_evidence_link_and_history(ui) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get(f"/ui/cards/{s.cards['held'].card_id}").text
        assert "reads retry_count" in page and "reads tool" in page
        assert f"/ui/trajectories/{s.trajectory}?step=6" in page
        assert "feedback: success" in page and "0.6" in page and "0.8" in page
        traj = c.get(f"/ui/trajectories/{s.trajectory}?step=6").text
        assert 'id="step-6"' in traj and 'id="step-3"' in traj and 'id="step-9"' in traj
        assert 'id="step-2"' not in traj and 'aria-current="step"' in traj


def test_try_a_state_matches_the_api_query(ui) -> None:
    server, s = ui
    state = '{"tool": "search", "retry_count": 1}'
    with signed_in(server.url, s.keys["read"]) as c:
        token = csrf_of(c.get("/ui/try").text)
        r = c.post("/ui/try", data={"csrf": token, "state": state, "budget": "200", "top_k": "5"})
        assert r.status_code == 200
        assert "search answers 429 on big pages" in r.text and "held" in r.text
        assert "Lessons of earlier runs" in r.text  # the prompt block
        assert "lookup needs an order id" in r.text  # a near miss, with its failed check
        api = httpx.post(
            f"{server.url}/v1/cards/query",
            headers={"Authorization": f"Bearer {s.keys['read']}"},
            json={
                "task_state": {"tool": "search", "retry_count": 1},
                "prompt_tokens": 200,
                "explain": True,
                "record_use": False,
            },
        ).json()
        shown = re.search(r'<pre id="prompt">(.*?)</pre>', r.text, re.S)
        assert shown and html.unescape(shown.group(1)) == api["prompt"]  # exactly the API's
        bad = c.post("/ui/try", data={"csrf": token, "state": "[1", "budget": "200"})
        assert bad.status_code == 400 and "not JSON" in bad.text


def test_review_decisions_land_in_history_with_the_key_name(ui) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["admin"]) as c:
        token = csrf_of(c.get("/ui/review").text)
        a, b = s.cards["review"].card_id, s.cards["review2"].card_id
        r = c.post(f"/ui/review/{a}/decide", data={"csrf": token, "decision": "reject"})
        assert r.status_code == 400 and "needs a reason" in r.text
        r = c.post(f"/ui/review/{b}/edit", data={"csrf": token, "fields": '{"confidence": 7}'})
        assert r.status_code == 400 and "fails validation" in r.text
        r = c.post(
            f"/ui/review/{b}/edit",
            data={
                "csrf": token,
                "fields": '{"scenario": "a second cancellation is refused by the API"}',
            },
        )
        assert r.status_code == 303
        r = c.post(
            f"/ui/review/{a}/decide",
            data={"csrf": token, "decision": "reject", "reason": "too vague"},
        )
        assert r.status_code == 303
        r = c.post(f"/ui/review/{b}/decide", data={"csrf": token, "decision": "approve"})
        assert r.status_code == 303
        hist = c.get(f"/ui/cards/{a}").text
        assert "rejected in review: too vague" in hist and "Ada admin (key:" in hist
        hist = c.get(f"/ui/cards/{b}").text
        assert "approved in review" in hist and "edited in review: scenario" in hist
        assert "Nothing waits for review" in c.get("/ui/review").text


def test_dead_letters_redrive_facts_overview_and_offline_docs(ui) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["write"]) as c:
        page = c.get("/ui/dead-letters").text
        assert "LLM answer invalid: no JSON" in page and "LLMTransient: 503" in page
        r = c.post(f"/ui/dead-letters/{s.dead_letter}/redrive", data={"csrf": csrf_of(page)})
        assert r.status_code == 303
        assert "No dead letters" in c.get("/ui/dead-letters").text
        overview = c.get("/ui/overview").text
        assert "<svg" in overview and "Cards by status" in overview
        assert "Uses per day" in overview and ">rate limited<" in overview
        assert c.get("/ui/facts").status_code == 200
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for page in ("/docs", "/redoc"):
            html = c.get(page).text
            assert "cdn" not in html.lower() and "/docs-assets/" in html
        assert c.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
        assert c.get("/docs-assets/redoc.standalone.js").status_code == 200
        assert c.get("/ui/static/console.css").status_code == 200


def _fact(engine, key: str, value: str, query: str | None = None, **kw) -> uuid.UUID:
    card = write_fact(
        engine=engine,
        namespace="team-a",
        fact=FactIn(key=key, value=value, query=query, **kw),
        actor="test",
    )
    return card.card_id


def test_a_key_without_read_scope_sees_no_console_page(ui, settings, engine) -> None:
    server, s = ui
    _fact(engine, "oncall", "alice is on call", valid_until=utcnow() + timedelta(days=1))
    fact = _fact(engine, "db", "we use PostgreSQL", "Which database do we use?")
    writeonly = create_key(engine=engine, namespace="team-a", scopes=["write"])[1]
    with signed_in(server.url, writeonly) as c:
        for page in (
            "/ui/facts",
            "/ui/facts?q=database",
            f"/ui/facts?fact={fact}",
            "/ui/cards",
            f"/ui/cards/{s.cards['held'].card_id}",
            f"/ui/trajectories/{s.trajectory}",
            "/ui/try",
            "/ui/dead-letters",
            "/ui/overview",
            "/ui/review",
        ):
            r = c.get(page)
            assert r.status_code == 403, page
            assert "alice is on call" not in r.text and "PostgreSQL" not in r.text, page
            assert "search answers 429" not in r.text, page
        # nor does trying a state (no page shows it a form: its token from the session)
        svc = MemoryService(engine=engine, settings=settings)
        user = Sessions(svc).user(c.cookies.get(COOKIE))
        assert user is not None
        token = user.csrf
        for state in ('{"tool": "search"}', "[1"):
            r = c.post("/ui/try", data={"csrf": token, "state": state})
            assert r.status_code == 403 and "search answers 429" not in r.text


def test_facts_page_searches_chains_conflicts_and_expiring(ui, engine) -> None:
    server, s = ui
    old = _fact(engine, "db", "we use MySQL", "Which database do we use?")
    new = _fact(engine, "db", "we use PostgreSQL", "Which database do we use?")
    # competing claims of one key (marked when written): both stay active
    gold = _fact(engine, "user.is_a", "a Gold member", "Is the user a Gold member?")
    silver = _fact(engine, "user.is_a", "a silver member", "Is the user a silver member?")
    soon = _fact(engine, "oncall", "alice is on call", valid_until=utcnow() + timedelta(hours=3))
    _fact(engine, "office", "berlin office")
    with signed_in(server.url, s.keys["read"]) as c:
        r = c.get("/ui/facts", params={"q": "which database"})
        assert r.status_code == 200
        hits = r.text.split("<h2>Results for")[1].split("</table>")[0]
        assert f"/ui/cards/{new}" in hits and "we use PostgreSQL" in hits
        assert f"/ui/cards/{old}" in hits  # the console shows superseded facts too
        assert "berlin office" not in hits
        empty = c.get("/ui/facts", params={"q": "zeppelin"}).text
        assert "No fact matches." in empty
        # what only a speaker said shows too, marked as their claim (fact search leaves it out)
        write_fact(
            engine=engine,
            namespace="team-a",
            fact=FactIn(key="kim.lives_in", value="Oslo", query="Where does Kim live?"),
            actor="facts-rules",
            standing=FactStanding.claim,
            speaker="Kim",
        )
        said = c.get("/ui/facts", params={"q": "where does Kim live"}).text
        assert "claim of Kim" in said.split("<h2>Results for")[1].split("</table>")[0]
        # the superseded fact's chain: itself, then what replaced it
        for start in (old, new):
            page = c.get("/ui/facts", params={"fact": str(start)}).text
            chain = page.split("<h2>Supersession chain</h2>")[1].split("</ol>")[0]
            assert chain.index(f"/ui/cards/{old}") < chain.index(f"/ui/cards/{new}")
            assert "superseded" in chain and "active" in chain
        page = c.get("/ui/facts").text
        conflicts = page.split("<h2>Conflicts</h2>")[1].split("<h2>Expiring</h2>")[0]
        assert "user.is_a" in conflicts and " vs " in conflicts
        assert f"/ui/cards/{gold}" in conflicts and f"/ui/cards/{silver}" in conflicts
        assert "MySQL" not in conflicts  # a superseded value is no conflict
        expiring = page.split("<h2>Expiring</h2>")[1]
        assert f"/ui/cards/{soon}" in expiring and "alice is on call" in expiring
        assert "berlin office" not in expiring and "No fact has an expiry" not in expiring
        # another team's key sees none of it, and team-a's fact id is not found
        assert c.get("/ui/facts", params={"fact": str(uuid.uuid4())}).status_code == 404
    with signed_in(server.url, s.keys["other"]) as c:
        page = c.get("/ui/facts", params={"q": "which database"}).text
        assert "PostgreSQL" not in page and "alice" not in page and "Gold" not in page
        assert c.get("/ui/facts", params={"fact": str(new)}).status_code == 404


def test_two_active_values_of_one_key_and_query_show_as_a_conflict(ui, engine) -> None:
    server, s = ui
    first = _fact(engine, "editor", "vim", "Which editor does the user prefer?")
    with session_scope(engine) as session:  # two writers that raced: both stayed active
        row = session.get(Card, first)
        twin = Card(
            **row.model_dump(exclude={"card_id", "value", "signature", "provenance"}),
            value="emacs",
            signature="raced-" + row.signature[:30],
            provenance={"producer": "test"},
        )
        session.add(twin)
        session.flush()
        second = twin.card_id
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get("/ui/facts").text
        conflicts = page.split("<h2>Conflicts</h2>")[1].split("<h2>Expiring</h2>")[0]
        assert f"/ui/cards/{first}" in conflicts and f"/ui/cards/{second}" in conflicts
        assert "No fact has an expiry" in page


def test_facts_are_listed_fifty_a_page_and_narrowed_by_the_search(ui, engine) -> None:
    server, s = ui
    for i in range(53):
        _fact(engine, f"city.{i:02d}", f"office number {i:02d}")
    _fact(engine, "db", "we use PostgreSQL", "Which database do we use?")
    with signed_in(server.url, s.keys["read"]) as c:
        first = c.get("/ui/facts")
        assert first.status_code == 200
        listed = first.text.split('id="all-h"')[1]
        assert "Active facts (54)" in listed
        rows = listed.split("</table>")[0].count("<tr>") - 1  # less the header's
        assert rows == 50
        nxt = html.unescape(listed.split('rel="next" href="')[1].split('"')[0])
        rest = c.get(nxt).text.split('id="all-h"')[1].split("</table>")[0]
        assert rest.count("<tr>") - 1 == 4
        assert 'rel="next"' not in c.get(nxt).text  # the last page
        seen = set(re.findall(r"office number (\d\d)", listed.split("</table>")[0] + rest))
        assert len(seen) == 53  # every fact once across the two pages
        narrowed = c.get("/ui/facts", params={"q": "postgres"}).text.split('id="all-h"')[1]
        assert "Active facts (1 containing" in narrowed and "we use PostgreSQL" in narrowed
        assert "office number" not in narrowed.split("</table>")[0]
