"""Recording uses without slowing reads: queued in memory, written in batches by one thread.

A query gets its use ids at once (feedback can name them); the rows follow within
`flush_s`. Feedback on a use flushes first, so it never looks for a row not yet written.

The writer shares the GIL with the event loop that answers queries, so its Python per row is
kept small: a query's uses are queued as one tuple, the values every use of a query shares
(namespace, time, context, query id) are converted for the database once per query, and the
rows go to the driver as plain tuples through statements compiled once per engine.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import SQLAlchemyError

from memory_core.models.card import Card, CardUse, UseArm
from memory_core.models.columns import row_id, utcnow

log = logging.getLogger(__name__)
MAX_PENDING = 200_000  # past this (database down for long) the oldest uses are dropped

# one query's uses: namespace, used_at, context, query_id, [(use_id, card_id, arm), ...]
Queued = tuple[
    str, datetime, dict[str, Any], uuid.UUID | None, list[tuple[uuid.UUID, uuid.UUID, str]]
]

_INSERT_COLUMNS = ("id", "card_id", "namespace", "used_at", "outcome", "context", "arm", "query_id")
_INSERT = text(
    f"INSERT INTO {CardUse.__tablename__} ({', '.join(_INSERT_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in _INSERT_COLUMNS)})"
)
_UPDATE_PARAMS = ("n", "at", "cid", "ns")
# used again: every decay tier may apply again later
_UPDATE = text(
    f"UPDATE {Card.__tablename__} SET use_count = use_count + :n, last_used_at = :at, "
    "decay_tier = 0 WHERE card_id = :cid AND namespace = :ns"
)


def use_context(state: dict[str, Any], via: str) -> dict[str, Any]:
    """What a use row keeps of the state: short scalar values only."""
    kept = {
        # PostgreSQL's JSONB refuses NUL; one such value must not poison a batch of uses
        k.replace("\x00", ""): v.replace("\x00", "") if isinstance(v, str) else v
        for k, v in state.items()
        if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 200
    }
    return {"via": via, "state": dict(list(kept.items())[:20])}


def _bind(table: Any, column: str, dialect: Dialect) -> Callable[[Any], Any]:
    """The column type's conversion of a Python value for this driver (as SQLAlchemy binds
    it: a UUID as hex text on SQLite, a UTC datetime without zone there, JSON as text)."""
    process = table.c[column].type.dialect_impl(dialect).bind_processor(dialect)
    return process if process is not None else (lambda value: value)


class _Statements:
    """The insert and the update compiled for one engine's dialect, with each column's bind
    conversion, and rows shaped as its driver takes them (tuples, or dicts when named)."""

    def __init__(self, dialect: Dialect) -> None:
        uses = CardUse.__table__  # type: ignore[attr-defined]
        # card.card_id and card.last_used_at have the types of card_use.card_id and used_at
        self.use = {c: _bind(uses, c, dialect) for c in _INSERT_COLUMNS}
        self.insert, insert_order = self._compiled(_INSERT, dialect)
        self.update, update_order = self._compiled(_UPDATE, dialect)
        self.named = insert_order is None
        if not self.named and (insert_order, update_order) != (_INSERT_COLUMNS, _UPDATE_PARAMS):
            raise RuntimeError(f"unexpected parameter order {insert_order} {update_order}")

    @staticmethod
    def _compiled(statement: Any, dialect: Dialect) -> tuple[str, tuple[str, ...] | None]:
        compiled = statement.compile(dialect=dialect)
        order = compiled.positiontup if dialect.positional else None
        return str(compiled), (tuple(order) if order is not None else None)

    def rows(self, values: list[tuple[Any, ...]], names: tuple[str, ...]) -> list[Any]:
        """The rows as the driver takes them."""
        return [dict(zip(names, v, strict=True)) for v in values] if self.named else values


class UseRecorder:
    """Batches use rows and the cards' use_count / last_used_at updates."""

    def __init__(self, *, engine: Engine, flush_s: float = 0.25) -> None:
        self._engine = engine
        self._flush_s = flush_s
        self._pending: list[Queued] = []
        self._queued = 0  # uses in _pending
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._statements: _Statements | None = None
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
        served, held = UseArm.served.value, UseArm.withheld.value
        uses = [(row_id(), cid, served) for cid in card_ids]
        uses += [(row_id(), cid, held) for cid in withheld]
        queued = (namespace, now or utcnow(), context or {}, query_id, uses)
        with self._lock:
            self._pending.append(queued)
            self._queued += len(uses)
            if self._queued > MAX_PENDING:
                self._drop(self._queued - MAX_PENDING)
        return {cid: use_id for use_id, cid, _ in uses}

    def _drop(self, overflow: int) -> None:
        """Drop the oldest `overflow` queued uses (under the lock)."""
        self._queued -= overflow
        self.dropped += overflow
        while overflow > 0:
            uses = self._pending[0][4]
            if len(uses) > overflow:
                del uses[:overflow]
                return
            overflow -= len(uses)
            del self._pending[0]

    def flush(self) -> int:
        """Write every queued use now (one transaction); returns the uses written."""
        with self._write_lock:
            with self._lock:
                batch, self._pending = self._pending, []
                count, self._queued = self._queued, 0
            if not count:
                return 0
            try:
                self._write(batch)
            except SQLAlchemyError as exc:
                with self._lock:  # keep them for the next attempt
                    self._pending[:0] = batch
                    self._queued += count
                self.last_error = str(exc).splitlines()[0]
                raise
            self.last_error = None
            self.written += count
            return count

    def _write(self, batch: list[Queued]) -> None:
        if self._statements is None:
            self._statements = _Statements(self._engine.dialect)
        st = self._statements
        b = st.use
        bind_id, bind_card = b["id"], b["card_id"]
        served = UseArm.served.value
        rows: list[tuple[Any, ...]] = []
        # (card as bound, namespace) -> [uses, last use, last use as bound, card's int]
        per_card: dict[tuple[Any, str], list[Any]] = {}
        for ns, at, ctx, query_id, uses in batch:
            # converted once per query: every use of it shares them
            ns_v, at_v, ctx_v = b["namespace"](ns), b["used_at"](at), b["context"](ctx)
            query_v = b["query_id"](query_id)
            for use_id, card_id, arm in uses:
                card_v = bind_card(card_id)
                rows.append((bind_id(use_id), card_v, ns_v, at_v, None, ctx_v, arm, query_v))
                if arm != served:  # a withheld card was not used
                    continue
                seen = per_card.get((card_v, ns))
                if seen is None:
                    per_card[(card_v, ns)] = [1, at, at_v, card_id.int]
                else:
                    seen[0] += 1
                    if at > seen[1]:
                        seen[1], seen[2] = at, at_v
        # key order (a UUID's number orders as its text): concurrent writers lock the same rows
        # in the same order
        updates = [
            (n, at_v, card_v, ns)
            for (card_v, ns), (n, _, at_v, _) in sorted(per_card.items(), key=lambda kv: kv[1][3])
        ]
        with self._engine.begin() as conn:
            if updates:
                conn.exec_driver_sql(st.update, st.rows(updates, _UPDATE_PARAMS))
            conn.exec_driver_sql(st.insert, st.rows(rows, _INSERT_COLUMNS))

    def _run(self) -> None:
        while not self._stop.wait(self._flush_s):
            try:
                self.flush()
            except SQLAlchemyError:
                # kept in the queue and shown by readiness; the next tick retries
                log.warning("writing card uses failed: %s", self.last_error)
