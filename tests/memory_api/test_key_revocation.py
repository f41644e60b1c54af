"""A deleted namespace's keys and a revoked key are refused at once by the server that deleted
or revoked them, and by another server on the same database within the change feed's refresh
interval (not after the key cache time), on real servers."""

from __future__ import annotations

import time

import httpx
import pytest

from memory_api.app import create_app
from memory_core.serve.keys import create_key, hash_key, list_keys, revoke_key
from memory_core.serve.service import MemoryService
from tests.helpers.serve import LiveServer, add_card


@pytest.fixture
def servers(settings, engine):
    """Two servers on one database, as two `hindsight serve` (or two forked workers) are."""
    settings.serve.key_cache_s = 600.0  # longer than any test: the cache alone never expires
    one, two = (MemoryService(engine=engine, settings=settings) for _ in range(2))
    with LiveServer(create_app(one)) as a, LiveServer(create_app(two)) as b:
        yield a, b


def _get(server, key: str, path: str = "/v1/cards") -> int:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.get(server.url + path, headers=headers, timeout=30).status_code


def _refused_within(server, key: str, limit_s: float) -> float:
    """How long until the server refuses the key (fails past limit_s)."""
    start = time.monotonic()
    while _get(server, key) != 401:
        assert time.monotonic() - start < limit_s, "the key still works"
        time.sleep(0.05)
    return time.monotonic() - start


def _cached_by_both(servers, engine, *keys: tuple[str, str]) -> list[str]:
    """New keys (namespace, scope), each checked by both servers (so both cache it)."""
    add_card(engine, namespace="team-a")
    made = [create_key(engine=engine, namespace=ns, scopes=[scope])[1] for ns, scope in keys]
    assert all(_get(server, key) == 200 for server in servers for key in made)
    return made


def test_a_deleted_namespaces_keys_are_refused_at_once_and_by_the_other_server(
    servers, settings, engine
) -> None:
    a, b = servers
    admin, reader, other = _cached_by_both(
        servers, engine, ("team-a", "admin"), ("team-a", "read"), ("team-b", "read")
    )

    assert _get(a, admin, "/v1/namespace") == 200
    auth = {"Authorization": f"Bearer {admin}"}
    assert httpx.delete(a.url + "/v1/namespace", headers=auth, timeout=30).status_code == 200
    assert _get(a, reader) == 401 and _get(a, admin) == 401  # the deleting server: at once
    refresh = settings.serve.snapshot_refresh_s
    _refused_within(b, reader, refresh + 1.0)
    assert _get(b, admin) == 401
    assert _get(a, other) == 200 and _get(b, other) == 200  # another namespace's key works


def test_a_key_revoked_elsewhere_is_refused_within_the_refresh_interval(
    servers, settings, engine
) -> None:
    gone, kept = _cached_by_both(servers, engine, ("team-a", "read"), ("team-a", "read"))

    # as `hindsight keys revoke` does, from a process that serves nothing
    key_id = next(k.id for k in list_keys(engine=engine) if k.key_hash == hash_key(gone))
    revoke_key(engine=engine, key_id=key_id)
    refresh = settings.serve.snapshot_refresh_s
    for server in servers:
        _refused_within(server, gone, refresh + 1.0)
        assert _get(server, kept) == 200
