"""GET and DELETE /v1/namespace, its export and import, on a real server: admin keys only,
the caller's namespace."""

from __future__ import annotations

import httpx
import pytest

from memory_api.app import create_app
from memory_core.namespaces.counts import namespace_counts
from memory_core.namespaces.export import export_lines
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from tests.helpers.namespace_data import plant
from tests.helpers.namespace_history import history
from tests.helpers.serve import LiveServer


@pytest.fixture
def api(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    with LiveServer(create_app(svc)) as server:
        yield server


def _c(server, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_an_admin_key_counts_and_deletes_its_namespace_only(api, settings, engine) -> None:
    plant(engine, settings, namespace="team-a", marker="a-text", n=1)
    plant(engine, settings, namespace="team-b", marker="b-text", n=1)
    admin = create_key(engine=engine, namespace="team-a", scopes=["admin"])[1]
    reader = create_key(engine=engine, namespace="team-a", scopes=["read", "write"])[1]
    other = create_key(engine=engine, namespace="team-b", scopes=["admin"])[1]
    kept = namespace_counts(engine, "team-b")

    assert _c(api, reader).get("/v1/namespace").status_code == 403
    assert _c(api, reader).delete("/v1/namespace").status_code == 403
    shown = _c(api, admin).get("/v1/namespace").json()
    assert shown["namespace"] == "team-a" and shown["cards"] == {"active": 1, "rejected": 1}
    assert shown["keys"] == 3 and shown["trajectories"] == 1

    gone = _c(api, admin).delete("/v1/namespace")
    assert gone.status_code == 200, gone.text
    assert gone.json()["rows"]["card"] == 3 and gone.json()["rows"]["api_key"] == 3
    assert namespace_counts(engine, "team-a") == []
    assert namespace_counts(engine, "team-b") == kept
    assert _c(api, other).get("/v1/namespace").json()["cards"] == {"active": 1, "rejected": 1}


def test_an_admin_key_exports_its_namespace_and_imports_into_its_own(api, engine) -> None:
    history(engine, "team-a")
    admin = create_key(engine=engine, namespace="team-a", scopes=["admin"])[1]
    reader = create_key(engine=engine, namespace="team-a", scopes=["read", "write"])[1]
    other = create_key(engine=engine, namespace="team-b", scopes=["admin"])[1]
    assert _c(api, reader).get("/v1/namespace/export").status_code == 403
    assert _c(api, reader).post("/v1/namespace/import", content=b"").status_code == 403

    got = _c(api, admin).get("/v1/namespace/export", params={"with_trajectories": "true"})
    assert got.status_code == 200 and got.headers["content-type"] == "application/x-ndjson"
    lines = got.content.splitlines(keepends=True)
    assert lines == list(export_lines(engine=engine, namespace="team-a", with_trajectories=True))

    into = _c(api, other).post("/v1/namespace/import", content=got.content)
    assert into.status_code == 200, into.text
    assert into.json()["namespace"] == "team-b" and into.json()["added"]["card"] == 5
    again = _c(api, other).post("/v1/namespace/import", content=got.content).json()
    assert set(again["added"].values()) == {0} and again["same_signature"] == []
    bad = _c(api, other).post("/v1/namespace/import", content=b"".join([*lines[:3], b"{x\n"]))
    assert bad.status_code == 400 and "line 4: not JSON" in bad.text
