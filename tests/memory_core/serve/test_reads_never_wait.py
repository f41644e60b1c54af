"""Serving reads never wait behind a writer: while another connection holds a write
transaction open (the use writer's flush, a pipeline stage, an operator's edit), a query that
reads the change feed, a first query that loads the snapshot, readiness, a card read, a
key's first check and the console's list all answer at once.

On SQLite every connection took the write lock at BEGIN unless marked read-only, and these
reads were not: each waited for the writer (seen as 1-4 s queries under HTTP load, behind
use flushes), and a snapshot load held the write lock for its whole read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

from memory_core.db import session_scope
from memory_core.serve.keys import create_key
from memory_core.serve.schemas import QueryRequest
from memory_core.serve.service import MemoryService
from tests.helpers.serve import add_card, keys_for

HOLD_S = 6.0  # how long the writer keeps its transaction open
PROMPT_S = 2.0  # a read answered within this did not wait for it
STATE = {"tool": "search"}


@contextmanager
def _writer_holding(engine: Engine, card_id: Any) -> Iterator[None]:
    """Another thread holds a write transaction on the card table for HOLD_S."""
    started, done = threading.Event(), threading.Event()

    def hold() -> None:
        with session_scope(engine) as session:
            session.execute(
                text("UPDATE card SET use_count = use_count + 1 WHERE card_id = :c"),
                {"c": card_id.hex if engine.dialect.name == "sqlite" else card_id},
            )
            started.set()
            done.wait(HOLD_S)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    assert started.wait(10)
    try:
        yield
    finally:
        done.set()
        t.join(30)


def _timed(call: Callable[[], Any]) -> float:
    t = time.monotonic()
    call()
    return time.monotonic() - t


def test_serving_reads_answer_while_a_writer_holds_its_transaction(settings, engine) -> None:
    settings.serve.snapshot_refresh_s = 0.2
    cards = [
        add_card(engine, scenario=f"card {i}", preconditions=['tool == "search"']) for i in range(3)
    ]
    keys = keys_for(engine)
    svc = MemoryService(engine=engine, settings=settings)
    who = svc.authenticate(keys["read"])
    fresh_key = create_key(engine=engine, namespace=who.namespace, scopes=["read"])[1]
    plain = QueryRequest(task_state=STATE, record_use=False)
    reads: dict[str, Callable[[], Any]] = {
        "first query (snapshot load)": lambda: svc.query_json(principal=who, request=plain),
        "query reading the feed": lambda: (
            time.sleep(0.3),  # the feed is due again
            svc.query_json(principal=who, request=plain),
        ),
        "readiness": svc.ready,
        "a card read": lambda: svc.get_card(principal=who, card_id=cards[1].card_id),
        "a key's first check": lambda: svc.authenticate(fresh_key),
        "the card list": lambda: svc.list_cards(principal=who),
    }
    took = {}
    for what, read in reads.items():  # each behind its own open write transaction
        with _writer_holding(engine, cards[0].card_id):
            took[what] = _timed(read)
    slow = {what: round(s, 2) for what, s in took.items() if s > PROMPT_S}
    assert not slow, f"waited for the writer: {slow}"
