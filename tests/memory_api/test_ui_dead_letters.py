"""Dead letters in the console, over HTTP on a real server: pages of 50, redrive a selection
or all, discard with a reason kept in the record, links to the flow runs that parked them."""

from __future__ import annotations

import re
import uuid

import pytest
from sqlalchemy import update

from memory_api.app import create_app
from memory_core.db import read_session, session_scope
from memory_core.ingest.store import ingest
from memory_core.models.trajectory import Trajectory
from memory_core.retrospect.dead_letters import count_dead_letters
from memory_core.retrospect.discard import DISCARDED
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer
from tests.helpers.ui import csrf_of, seed, signed_in

PREFECT = "http://127.0.0.1:4200"


def _park(engine, n: int, namespace: str = "team-a") -> list[str]:
    """n more dead letters in a namespace, parked by one flow run; their keys."""
    report = ingest(
        engine=engine,
        records=[
            (f"r{i}", {"id": f"parked-{i:03d}", "messages": [{"role": "user", "content": f"{i}"}]})
            for i in range(n)
        ],
        namespace=namespace,
        task_type="support",
        max_observation_chars=2000,
    )
    assert report.stored == n
    keys = [f"parked-{i:03d}" for i in range(n)]
    with session_scope(engine) as session:
        session.execute(
            update(Trajectory)
            .where(Trajectory.key.in_(keys), Trajectory.namespace == namespace)  # type: ignore[attr-defined]
            .values(status="dead_letter", error="LLMTransient: 503", dead_letter_run=RUN)
        )
    return keys


RUN = str(uuid.UUID(int=7))


def _ids(page: str) -> list[str]:
    return re.findall(r'name="id" value="([0-9a-f-]+)"', page)


@pytest.fixture
def ui(settings, engine):
    settings.serve.prefect_ui_url = PREFECT + "/"
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    _park(engine, 120)
    with LiveServer(create_app(svc)) as server:
        yield server, seeded


def test_pages_of_fifty_with_links_to_the_parking_flow_run(ui) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["write"]) as c:
        first = c.get("/ui/dead-letters").text
        assert "Dead letters (121)" in first and "page 1 of 3" in first
        assert len(_ids(first)) == 50 and "Redrive all 121" in first
        assert f'href="{PREFECT}/runs/flow-run/{RUN}"' in first
        assert "Discard selected" not in first  # a write key redrives, only admins discard
        seen = set(_ids(first))
        for n, size in ((2, 50), (3, 21)):
            page = c.get(f"/ui/dead-letters?page={n}").text
            assert f"page {n} of 3" in page and len(_ids(page)) == size
            assert not seen & set(_ids(page))
            seen |= set(_ids(page))
        assert len(seen) == 121
        # past the end: the last page
        assert "page 3 of 3" in c.get("/ui/dead-letters?page=99").text


def test_redrive_a_selection_then_all(ui, engine) -> None:
    server, s = ui
    _park(engine, 1, namespace="team-b")
    with signed_in(server.url, s.keys["write"]) as c:
        page = c.get("/ui/dead-letters").text
        two = _ids(page)[:2]
        r = c.post("/ui/dead-letters/redrive", data={"csrf": csrf_of(page), "id": two})
        assert r.status_code == 303 and r.headers["location"].endswith("redriven+2")
        assert count_dead_letters(engine=engine, namespace="team-a") == 119
        with read_session(engine) as session:
            assert {session.get(Trajectory, uuid.UUID(i)).status for i in two} == {"pending"}
        none = c.post("/ui/dead-letters/redrive", data={"csrf": csrf_of(page)})
        assert none.status_code == 400 and "select at least one" in none.text
        bad = c.post("/ui/dead-letters/redrive", data={"csrf": csrf_of(page), "id": "nope"})
        assert bad.status_code == 400 and "not a dead letter" in bad.text
        r = c.post("/ui/dead-letters/redrive", data={"csrf": csrf_of(page), "all": "yes"})
        assert r.headers["location"].endswith("redriven+119")
        assert count_dead_letters(engine=engine, namespace="team-a") == 0
        assert "No dead letters." in c.get("/ui/dead-letters").text
    # team-b's dead letters were never team-a's to redrive
    assert count_dead_letters(engine=engine, namespace="team-b") == 1


def test_discard_keeps_the_reason_in_the_record(ui, engine) -> None:
    server, s = ui
    with signed_in(server.url, s.keys["admin"]) as c:
        page = c.get("/ui/dead-letters").text
        assert "Discard selected" in page
        token = csrf_of(page)
        chosen = [str(s.dead_letter), _ids(page)[5]]
        r = c.post("/ui/dead-letters/discard", data={"csrf": token, "id": chosen, "reason": " "})
        assert r.status_code == 400 and "a reason is needed" in r.text
        assert count_dead_letters(engine=engine, namespace="team-a") == 121
        why = "a test conversation, nothing to learn"
        r = c.post("/ui/dead-letters/discard", data={"csrf": token, "id": chosen, "reason": why})
        assert r.status_code == 303 and r.headers["location"].endswith("discarded+2")
        assert count_dead_letters(engine=engine, namespace="team-a") == 119
        page = c.get("/ui/dead-letters").text
        assert "Dead letters (119)" in page and "Discarded (2)" in page and why in page
        assert "Ada admin" in page and "LLM answer invalid: no JSON" in page
        # discarding again changes nothing: they are no longer parked
        r = c.post("/ui/dead-letters/discard", data={"csrf": token, "id": chosen, "reason": why})
        assert r.headers["location"].endswith("discarded+0")
    with read_session(engine) as session:
        row = session.get(Trajectory, s.dead_letter)
        assert row is not None and row.status == "discarded"
        (record,) = row.extra[DISCARDED]
        assert record["reason"] == why and "Ada admin" in record["by"]
        assert {p["part"] for p in record["parts"]} == {"retrospect", "facts"}
        assert "facts_dead_letter" not in row.extra and row.error  # the error stays


def test_read_keys_are_refused_and_forms_need_csrf(ui, engine) -> None:
    server, s = ui
    posts = [
        ("/ui/dead-letters/redrive", {"all": "yes"}),
        ("/ui/dead-letters/redrive", {"id": str(s.dead_letter)}),
        ("/ui/dead-letters/discard", {"id": str(s.dead_letter), "reason": "x"}),
        (f"/ui/dead-letters/{s.dead_letter}/redrive", {}),
    ]
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get("/ui/dead-letters").text
        assert "Redrive" not in page and "Discard selected" not in page and not _ids(page)
        for url, data in posts:
            r = c.post(url, data={"csrf": csrf_of(page), **data})
            assert r.status_code == 403 and 'aria-label="Console"' in r.text, url
    with signed_in(server.url, s.keys["write"]) as c:
        r = c.post(posts[2][0], data={"csrf": csrf_of(c.get("/ui/try").text), **posts[2][1]})
        assert r.status_code == 403  # a write key redrives; discarding is an admin's
    with signed_in(server.url, s.keys["admin"]) as c:
        for url, data in posts:
            for bad in ({}, {"csrf": "0" * 32}):
                r = c.post(url, data={**data, **bad})
                assert r.status_code == 403 and "CSRF" in r.text, url
    assert count_dead_letters(engine=engine, namespace="team-a") == 121


def test_no_prefect_ui_configured_no_links(settings, engine) -> None:
    svc = MemoryService(engine=engine, settings=settings)
    s = seed(engine)
    _park(engine, 1)
    with LiveServer(create_app(svc)) as server, signed_in(server.url, s.keys["read"]) as c:
        page = c.get("/ui/dead-letters").text
        assert "/runs/flow-run/" not in page and f"flow run <code>{RUN[:8]}" in page
