"""The console's namespace page on a real server: counts for admin keys, and deleting the
namespace only after its name is typed, with CSRF; read keys refused."""

from __future__ import annotations

import pytest

from memory_api.app import create_app
from memory_core.namespaces.counts import namespace_counts
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer
from tests.helpers.ui import csrf_of, seed, signed_in


@pytest.fixture
def ui(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    with LiveServer(create_app(svc)) as server:
        yield server, seeded


def test_an_admin_sees_the_counts_and_deletes_after_typing_the_name(ui, engine) -> None:
    server, s = ui
    kept = namespace_counts(engine, "team-b")
    (held,) = namespace_counts(engine, "team-a")
    with signed_in(server.url, s.keys["write"]) as c:
        page = c.get("/ui/cards").text
        assert 'href="/ui/namespace"' not in page
        assert c.get("/ui/namespace").status_code == 403
        r = c.post("/ui/namespace/delete", data={"csrf": csrf_of(page), "confirm": "team-a"})
        assert r.status_code == 403
    with signed_in(server.url, s.keys["admin"]) as c:
        page = c.get("/ui/namespace").text
        assert "Namespace team-a" in page and 'href="/ui/namespace"' in page
        assert f"<td>{held.trajectories}</td>" in page and f"<td>{held.keys}</td>" in page
        token = csrf_of(page)
        r = c.post("/ui/namespace/delete", data={"confirm": "team-a"})
        assert r.status_code == 403 and "CSRF" in r.text
        r = c.post("/ui/namespace/delete", data={"csrf": token, "confirm": "team-b"})
        assert r.status_code == 400 and "type the namespace&#39;s name, team-a" in r.text
        assert namespace_counts(engine, "team-a") == [held]
        r = c.post("/ui/namespace/delete", data={"csrf": token, "confirm": "team-a"})
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        assert c.get("/ui/namespace").status_code in (303, 401)  # its key went with it
    assert namespace_counts(engine, "team-a") == []
    assert namespace_counts(engine, "team-b") == kept
