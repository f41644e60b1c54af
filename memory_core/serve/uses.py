"""Recording uses without slowing reads: queued in memory, written in batches by one thread.

A query gets its use ids at once (feedback can name them); the rows follow within
`flush_s`. Feedback on a use flushes first, so it never looks for a row not yet written.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col

from memory_core.db import session_scope
from memory_core.models.card import Card, CardUse, UseArm
from memory_core.models.columns import row_id, utcnow

log = logging.getLogger(__name__)
MAX_PENDING = 200_000  # past this (database down for long) the oldest uses are dropped


@dataclass(frozen=True, slots=True)
class PendingUse:
    """One card served once, not yet written."""

    use_id: uuid.UUID
    card_id: uuid.UUID
    namespace: str
    used_at: datetime
    context: dict[str, Any]
    arm: str = UseArm.served.value
    query_id: uuid.UUID | None = None


def use_context(state: dict[str, Any], via: str) -> dict[str, Any]:
    """What a use row keeps of the state: short scalar values only."""
    kept = {
        # PostgreSQL's JSONB refuses NUL; one such value must not poison a batch of uses
        k.replace("\x00", ""): v.replace("\x00", "") if isinstance(v, str) else v
        for k, v in state.items()
        if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 200
    }
    return {"via": via, "state": dict(list(kept.items())[:20])}


class UseRecorder:
    """Batches use rows and the cards' use_count / last_used_at updates."""

    def __init__(self, *, engine: Engine, flush_s: float = 0.25) -> None:
        self._engine = engine
        self._flush_s = flush_s
        self._pending: list[PendingUse] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.written = 0
        self.dropped = 0
        self.last_error: str | None = None

    def start(self) -> None:
        """Start the background writer (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="use-recorder", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the writer after a last flush."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.flush()

    def record(
        self,
        *,
        namespace: str,
        card_ids: Sequence[uuid.UUID],
        context: dict[str, Any] | None = None,
        now: datetime | None = None,
        withheld: Sequence[uuid.UUID] = (),
        query_id: uuid.UUID | None = None,
    ) -> dict[uuid.UUID, uuid.UUID]:
        """Queue one use of each card, served, and one of each withheld card (the holdout's
        other arm: a row, no use counted); returns card id -> use id."""
        now = now or utcnow()
        ctx = context or {}
        served, held = UseArm.served.value, UseArm.withheld.value
        uses = [
            PendingUse(row_id(), cid, namespace, now, ctx, served, query_id) for cid in card_ids
        ]
        uses += [PendingUse(row_id(), cid, namespace, now, ctx, held, query_id) for cid in withheld]
        with self._lock:
            self._pending.extend(uses)
            overflow = len(self._pending) - MAX_PENDING
            if overflow > 0:
                del self._pending[:overflow]
                self.dropped += overflow
        return {u.card_id: u.use_id for u in uses}

    def flush(self) -> int:
        """Write every queued use now (one transaction); returns the uses written."""
        with self._write_lock:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return 0
            try:
                self._write(batch)
            except SQLAlchemyError as exc:
                with self._lock:  # keep them for the next attempt
                    self._pending[:0] = batch
                self.last_error = str(exc).splitlines()[0]
                raise
            self.last_error = None
            self.written += len(batch)
            return len(batch)

    def _write(self, batch: list[PendingUse]) -> None:
        per_card: dict[tuple[uuid.UUID, str], list[datetime]] = defaultdict(list)
        for u in batch:
            if u.arm == UseArm.served.value:  # a withheld card was not used
                per_card[(u.card_id, u.namespace)].append(u.used_at)
        with session_scope(self._engine) as session:
            # key order: concurrent writers lock the same rows in the same order
            if per_card:
                session.connection().execute(
                    update(Card)
                    .where(
                        col(Card.card_id) == bindparam("cid"),
                        col(Card.namespace) == bindparam("ns"),
                    )
                    .values(
                        use_count=col(Card.use_count) + bindparam("n"),
                        last_used_at=bindparam("at"),
                        decay_tier=0,  # used again: every decay tier may apply again later
                    ),
                    [
                        {"cid": cid, "ns": ns, "n": len(times), "at": max(times)}
                        for (cid, ns), times in sorted(
                            per_card.items(), key=lambda kv: str(kv[0][0])
                        )
                    ],
                )
            # Core, not the ORM's bulk insert: the same rows at a fraction of the Python per row
            # (the writer shares the GIL with every query)
            session.connection().execute(
                insert(CardUse.__table__),  # type: ignore[attr-defined]
                [
                    {
                        "id": u.use_id,
                        "card_id": u.card_id,
                        "namespace": u.namespace,
                        "used_at": u.used_at,
                        "outcome": None,
                        "context": u.context,
                        "arm": u.arm,
                        "query_id": u.query_id,
                    }
                    for u in batch
                ],
            )

    def _run(self) -> None:
        while not self._stop.wait(self._flush_s):
            try:
                self.flush()
            except SQLAlchemyError:
                # kept in the queue and shown by readiness; the next tick retries
                log.warning("writing card uses failed: %s", self.last_error)
