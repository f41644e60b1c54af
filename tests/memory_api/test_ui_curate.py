"""Curating without the CLI, over HTTP on a real server: pin, unpin, restore, keys."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from memory_api.app import create_app
from memory_core.db import read_session
from memory_core.models.api_key import ApiKey
from memory_core.models.card import Card, CardVersion
from memory_core.serve.keys import list_keys
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card
from tests.helpers.ui import csrf_of, seed, signed_in


@pytest.fixture
def ui(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    with LiveServer(create_app(svc)) as server:
        yield server, seeded


def _card(engine, card_id) -> Card:
    with read_session(engine) as session:
        card = session.get(Card, card_id)
        assert card is not None
        session.expunge(card)
        return card


def _versions(engine, card_id) -> list[CardVersion]:
    with read_session(engine) as session:
        rows = session.query(CardVersion).filter(CardVersion.card_id == card_id).all()
        return sorted(rows, key=lambda v: v.version)


def test_pin_unpin_and_restore_from_the_card_page(ui, engine) -> None:
    server, s = ui
    held = s.cards["held"].card_id
    archived = add_card(engine, scenario="cold lesson from spring", status="archived")
    with signed_in(server.url, s.keys["admin"]) as c:
        page = c.get(f"/ui/cards/{held}").text
        token = csrf_of(page)
        assert "Pin: never withhold it" in page and "Restore from the archive" not in page
        r = c.post(f"/ui/cards/{held}/pin", data={"csrf": token, "pinned": "on"})
        assert r.status_code == 303 and r.headers["location"].endswith("done=pinned")
        page = c.get(r.headers["location"]).text
        assert "pinned: never withheld" in page and ">Unpin<" in page
        assert _card(engine, held).pinned
        last = _versions(engine, held)[-1]
        assert "Ada admin" in last.actor and last.reason.startswith("pinned")
        # pinning again is a no-op: no new version
        n = len(_versions(engine, held))
        c.post(f"/ui/cards/{held}/pin", data={"csrf": token, "pinned": "on"})
        assert len(_versions(engine, held)) == n
        c.post(f"/ui/cards/{held}/pin", data={"csrf": token, "pinned": "off"})
        assert not _card(engine, held).pinned and _versions(engine, held)[-1].reason == "unpinned"
        bad = c.post(f"/ui/cards/{held}/pin", data={"csrf": token, "pinned": "maybe"})
        assert bad.status_code == 400 and "pinned must be on or off" in bad.text

        page = c.get(f"/ui/cards/{archived.card_id}").text
        assert "Restore from the archive" in page
        r = c.post(f"/ui/cards/{archived.card_id}/restore", data={"csrf": token})
        assert r.status_code == 303
        assert _card(engine, archived.card_id).status == "active"
        assert "restored from the archive" in c.get(r.headers["location"]).text
        # restoring a card that is not archived says why
        again = c.post(f"/ui/cards/{archived.card_id}/restore", data={"csrf": token})
        assert again.status_code == 400 and "not archived" in again.text
        # another namespace's card is not found
        foreign = s.cards["foreign"].card_id
        r = c.post(f"/ui/cards/{foreign}/pin", data={"csrf": token, "pinned": "on"})
        assert r.status_code == 404 and not _card(engine, foreign).pinned


def test_card_actions_refuse_read_keys_and_forms_without_csrf(ui, engine) -> None:
    server, s = ui
    held = s.cards["held"].card_id
    archived = add_card(engine, scenario="cold lesson from spring", status="archived")
    actions = [
        (f"/ui/cards/{held}/pin", {"pinned": "on"}),
        (f"/ui/cards/{archived.card_id}/restore", {}),
        ("/ui/keys", {"name": "sneaky", "scope_admin": "on"}),
        (f"/ui/keys/{_key_id(engine, 'Ada write')}/revoke", {}),
    ]
    with signed_in(server.url, s.keys["write"]) as c:
        page = c.get(f"/ui/cards/{held}").text
        assert "Pin: never withhold it" not in page and 'href="/ui/keys"' not in page
        token = csrf_of(page)
        for url, data in actions:
            r = c.post(url, data={"csrf": token, **data})
            assert r.status_code == 403 and 'aria-label="Console"' in r.text, url
        assert c.get("/ui/keys").status_code == 403
    with signed_in(server.url, s.keys["admin"]) as c:
        token = csrf_of(c.get("/ui/keys").text)
        for url, data in actions:
            for bad in ({}, {"csrf": "0" * 32}):
                r = c.post(url, data={**data, **bad})
                assert r.status_code == 403 and "CSRF" in r.text, url
    assert not _card(engine, held).pinned and _card(engine, archived.card_id).status == "archived"
    keys = list_keys(engine=engine, namespace="team-a")
    assert "sneaky" not in {k.name for k in keys} and all(k.revoked_at is None for k in keys)


def _key_id(engine, name: str):
    return next(k.id for k in list_keys(engine=engine) if k.name == name)


def test_keys_page_creates_once_lists_last_use_and_revokes(ui, engine) -> None:
    server, s = ui
    # a key used on the API shows its last use
    httpx.get(f"{server.url}/v1/cards", headers={"Authorization": f"Bearer {s.keys['read']}"})
    read_id = _key_id(engine, "Ada read")
    for _ in range(100):  # written by the use writer's thread, not by the request
        with read_session(engine) as session:
            used = session.get(ApiKey, read_id)
            if used is not None and used.last_used_at is not None:
                break
        time.sleep(0.1)
    with signed_in(server.url, s.keys["admin"]) as c:
        page = c.get("/ui/keys").text
        assert page.count("<tr>") == 4  # the header and team-a's three keys, not team-b's
        assert "Bob" not in page
        row = re.search(r"<td>Ada read</td>.*?</tr>", page, re.S)
        assert row and "never" not in row.group(0)
        token = csrf_of(page)
        r = c.post(
            "/ui/keys",
            data={"csrf": token, "name": "night agent", "scope_read": "on", "scope_write": "on"},
        )
        assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
        secret = re.search(r'value="(hs_[^"]+)"', r.text)
        assert secret and "not shown again" in r.text
        # the secret works, once shown it is never shown again
        ok = httpx.get(
            f"{server.url}/v1/cards", headers={"Authorization": f"Bearer {secret.group(1)}"}
        )
        assert ok.status_code == 200
        assert secret.group(1) not in c.get("/ui/keys").text
        made = next(k for k in list_keys(engine=engine) if k.name == "night agent")
        assert made.namespace == "team-a" and made.scopes == ["read", "write"]
        # refusals name the problem
        r = c.post("/ui/keys", data={"csrf": token, "name": "", "scope_read": "on"})
        assert r.status_code == 400 and "needs a name" in r.text
        r = c.post("/ui/keys", data={"csrf": token, "name": "no scope"})
        assert r.status_code == 400 and "scopes must be some of" in r.text
        r = c.post(
            "/ui/keys",
            data={"csrf": token, "name": "elsewhere", "scope_read": "on", "namespace": "team-b"},
        )
        assert r.status_code == 403 and "administers namespace &#39;team-a&#39;" in r.text
        assert "elsewhere" not in {k.name for k in list_keys(engine=engine)}
        # revoke: the key stops working at once on this server, and stays listed as revoked
        r = c.post(f"/ui/keys/{made.id}/revoke", data={"csrf": token})
        assert r.status_code == 303
        gone = httpx.get(
            f"{server.url}/v1/cards", headers={"Authorization": f"Bearer {secret.group(1)}"}
        )
        assert gone.status_code == 401
        with read_session(engine) as session:
            row_ = session.get(ApiKey, made.id)
            assert row_ is not None and row_.revoked_at is not None
        # not the key of this session, nor another namespace's key
        r = c.post(f"/ui/keys/{_key_id(engine, 'Ada admin')}/revoke", data={"csrf": token})
        assert r.status_code == 400 and "signed in with" in r.text
        r = c.post(f"/ui/keys/{_key_id(engine, 'Bob')}/revoke", data={"csrf": token})
        assert r.status_code == 404
    assert all(k.revoked_at is None for k in list_keys(engine=engine, namespace="team-b"))
