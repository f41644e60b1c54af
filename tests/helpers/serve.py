"""Cards and keys for the serving tests."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from memory_core.db import session_scope
from memory_core.models.card import Card
from memory_core.preconditions import compile_all
from memory_core.serve.keys import create_key


def add_card(
    engine: Engine,
    *,
    namespace: str = "team-a",
    scenario: str = "search answers 429",
    preconditions: list[str] | None = None,
    tool: str = "search",
    modes: list[dict[str, str]] | None = None,
    confidence: float = 0.7,
    status: str = "active",
    use_count: int = 0,
    kind: str = "experience",
    origin: str | None = None,
) -> Card:
    """Store one card directly (as the nightly run would have)."""
    pre = [c.source for c in compile_all(preconditions or [])]
    card = Card(
        namespace=namespace,
        kind=kind,
        scenario=scenario,
        preconditions=pre,
        action_sequence=[{"tool": tool, "params_template": {}, "note": "smaller page"}],
        failure_modes=modes
        if modes is not None
        else [{"mode": "rate limited", "handling": "back off"}],
        confidence=confidence,
        status=status,
        use_count=use_count,
        signature=hashlib.sha256(f"{namespace}{scenario}{pre}".encode()).hexdigest()[:40],
        provenance={"producer": "test", **({"origin": origin} if origin else {})},
    )
    with session_scope(engine) as session:
        session.add(card)
    return card


def keys_for(engine: Engine, namespace: str = "team-a") -> dict[str, str]:
    """One key per scope set: read, write (with read), admin, and a read key of another team."""
    out: dict[str, Any] = {}
    for name, scopes in (("read", ["read"]), ("write", ["read", "write"]), ("admin", ["admin"])):
        out[name] = create_key(engine=engine, namespace=namespace, scopes=scopes, name=name)[1]
    out["other"] = create_key(engine=engine, namespace="team-b", scopes=["admin"])[1]
    out["writeonly"] = create_key(engine=engine, namespace=namespace, scopes=["write"])[1]
    return out


class LiveServer:
    """A real uvicorn server on a free loopback port, in a thread of the test process."""

    def __init__(self, app: Any) -> None:
        import socket
        import threading

        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        import time

        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def served_cards(
    engine: Engine, *, state: dict[str, Any], namespace: str = "default", top_k: int = 10
) -> list[Any]:
    """The cards an agent is served for a state (the service's retrieval; not a use)."""
    import uuid

    from memory_core.serve.keys import Principal
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

    who = Principal(key_id=uuid.UUID(int=0), namespace=namespace, scopes=frozenset({"read"}))
    request = QueryRequest(task_state=state, top_k=top_k, record_use=False)
    service = MemoryService(engine=engine, settings=Settings())
    return [h.card for h in service.query(principal=who, request=request, via="test").cards]


@contextmanager
def sqlite_moved_away(engine: Engine, tmp_path: Path) -> Iterator[None]:
    """An outage of a SQLite database: its file and write-ahead log moved away (new
    connections find an empty file without tables), put back when the block ends."""
    path = str(engine.url.database)
    engine.dispose()
    files = [f for f in (path, path + "-wal", path + "-shm") if os.path.exists(f)]
    for f in files:  # the database and its write-ahead log move away together
        os.rename(f, tmp_path / os.path.basename(f))
    try:
        yield
    finally:
        engine.dispose()
        for f in (path, path + "-wal", path + "-shm"):
            if os.path.exists(f):
                os.remove(f)
        for f in files:
            os.replace(tmp_path / os.path.basename(f), f)
        # a thread may have opened the empty file again between the first dispose and the
        # files' return: that connection, pooled, would read the empty file for good
        engine.dispose()
