"""Recording uses without slowing reads: queued in memory, written in batches by one thread.

A query gets its use ids at once (feedback can name them); the rows follow within
`flush_s`. Feedback on a use flushes first, so it never looks for a row not yet written.

The writer shares the GIL with the event loop that answers queries, so its Python per row is
kept small: a query's uses are queued as one tuple, the values every use of a query shares
(namespace, time, context, query id) are converted for the database once per query, and the
rows go to the driver a hundred to a statement (serve/use_sql.py: each statement hands the GIL
back once, and under load each hand-back waits for the event loop).

Layer: service.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import chain, islice
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from memory_core.models.card import UseArm
from memory_core.models.columns import row_id, utcnow
from memory_core.serve.use_sql import CHUNK, INSERT_COLUMNS, QUERY_COLUMNS, UseStatements

log = logging.getLogger(__name__)
MAX_PENDING = 200_000  # past this (database down for long) the oldest uses are dropped

# what the query log keeps of a query beyond its uses: the key that asked, retrieval's
# milliseconds, and each card's score
Asked = tuple[uuid.UUID | None, float, Mapping[uuid.UUID, float]]
# one query's uses: namespace, used_at, (task state, via) or None, query_id,
# [(use_id, card_id, arm), ...], and its query log facts (None: no query log row)
Queued = tuple[
    str,
    datetime,
    tuple[Mapping[str, Any], str] | None,
    uuid.UUID | None,
    list[tuple[uuid.UUID, uuid.UUID, str]],
    Asked | None,
]


def use_context(state: Mapping[str, Any], via: str) -> dict[str, Any]:
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
        self._pending: list[Queued] = []
        self._queued = 0  # uses in _pending
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._statements: UseStatements | None = None
        self.written = 0
        self.dropped = 0
        self.rejected = 0  # uses the database refused for their data (see flush)
        self.last_error: str | None = None
        # other small writes this thread makes after each flush (a key's last use): the
        # request that saw them must not write, so as never to wait behind a writer
        self.also: list[Callable[[], None]] = []

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
        for write in self.also:
            write()

    @property
    def pending(self) -> int:
        """Uses queued and not yet written (a writer falling behind shows here first)."""
        return self._queued

    def record(
        self,
        *,
        namespace: str,
        card_ids: Sequence[uuid.UUID],
        state: Mapping[str, Any] | None = None,
        via: str = "api",
        now: datetime | None = None,
        withheld: Sequence[uuid.UUID] = (),
        query_id: uuid.UUID | None = None,
        asked: Asked | None = None,
    ) -> dict[uuid.UUID, uuid.UUID]:
        """Queue one use of each card, served, and one of each withheld card (the holdout's
        other arm: a row, no use counted); returns card id -> use id. The rows keep
        `use_context(state, via)`, made by the writer (the state is not changed after).
        With a query_id and `asked` (key id, latency in ms, card id -> score), the query's
        row in the query log is written with its uses."""
        served, held = UseArm.served.value, UseArm.withheld.value
        uses = [(row_id(), cid, served) for cid in card_ids]
        uses += [(row_id(), cid, held) for cid in withheld]
        context = (state, via) if state is not None else None
        logged = asked if query_id is not None else None
        queued = (namespace, now or utcnow(), context, query_id, uses, logged)
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
        """Write every queued use now (one transaction); returns the uses written. A batch the
        database refuses for its data (a use of a card no longer there) is written query by
        query instead, and only the refused queries' uses are dropped (`rejected`): one bad
        row must not hold back every use after it."""
        with self._write_lock:
            with self._lock:
                batch, self._pending = self._pending, []
                count, self._queued = self._queued, 0
            if not count:
                return 0
            rejected = self.rejected
            try:
                self._write(batch)
            except (IntegrityError, DataError):
                count = self._write_each(batch)  # keeps what it did not write when it raises
            except SQLAlchemyError as exc:
                self._keep(batch)
                self.last_error = str(exc).splitlines()[0]
                raise
            if self.rejected == rejected:
                self.last_error = None
            self.written += count
            return count

    def _write_each(self, batch: list[Queued]) -> int:
        """Each query's uses in a transaction of their own; returns the uses written (an error
        other than the data's keeps the queries not yet written, and is raised)."""
        written = 0
        for i, queued in enumerate(batch):
            try:
                self._write([queued])
            except (IntegrityError, DataError) as exc:
                self.rejected += len(queued[4])
                self.last_error = str(exc).splitlines()[0]
                log.warning("uses of one query refused, dropped: %s", self.last_error)
                continue
            except SQLAlchemyError as exc:
                self.written += written
                self._keep(batch[i:])
                self.last_error = str(exc).splitlines()[0]
                raise
            written += len(queued[4])
        return written

    def _keep(self, batch: list[Queued]) -> None:
        """Queue a batch again, ahead of what came since (for the next attempt)."""
        with self._lock:
            self._pending[:0] = batch
            self._queued += sum(len(q[4]) for q in batch)

    def _write(self, batch: list[Queued]) -> None:
        if self._statements is None:
            self._statements = UseStatements(self._engine.dialect)
        st = self._statements
        b = st.bind
        # namespace -> card's int -> [served uses, last use, card id]
        per_card: dict[str, dict[int, list[Any]]] = {}
        served = UseArm.served.value
        for ns, at, _, _, uses, _ in batch:
            cards = per_card.setdefault(ns, {})
            for _, card_id, arm in uses:
                if arm != served:  # a withheld card was not used
                    continue
                seen = cards.get(card_id.int)
                if seen is None:
                    cards[card_id.int] = [1, at, card_id]
                else:
                    seen[0] += 1
                    if at > seen[1]:
                        seen[1] = at
        # a card's last use is its query's time: converted once per query, not once per card
        times: dict[datetime, Any] = {}

        def bind_time(at: datetime) -> Any:
            times[at] = converted = b["used_at"](at)
            return converted

        # what a use row keeps of its query's state, made once for its uses and its log row
        contexts = [use_context(*q[2]) if q[2] is not None else None for q in batch]
        # each chunk converted just before it runs: the statement hands the GIL back, so the
        # event loop waits for the writer's Python one chunk at a time, not a whole batch
        with self._engine.begin() as conn:
            # namespace and key order (a UUID's number orders as its text): writers in other
            # processes lock the same rows in the same order
            for ns in sorted(per_card):
                cards = per_card[ns]
                ordered = [cards[k] for k in sorted(cards)]
                ns_v = b["namespace"](ns)
                for i in range(0, len(ordered), CHUNK):
                    chunk = [
                        (n, times.get(at) or bind_time(at), b["card_id"](cid))
                        for n, at, cid in ordered[i : i + CHUNK]
                    ]
                    if st.locks:
                        lock = st.lock(len(chunk))
                        conn.exec_driver_sql(lock.sql, lock.params([*(c[2] for c in chunk), ns_v]))
                    update = st.update(len(chunk))
                    conn.exec_driver_sql(
                        update.sql, update.params([*chain.from_iterable(chunk), ns_v])
                    )
            for rows in _chunks(_use_rows(batch, contexts, b), CHUNK * len(INSERT_COLUMNS)):
                insert = st.insert(len(rows) // len(INSERT_COLUMNS))
                conn.exec_driver_sql(insert.sql, insert.params(rows))
            # the query log in the same transaction: a query's row exists when its uses do
            queries = _query_rows(batch, contexts, st.bind_query)
            for rows in _chunks(queries, CHUNK * len(QUERY_COLUMNS)):
                insert = st.insert_queries(len(rows) // len(QUERY_COLUMNS))
                conn.exec_driver_sql(insert.sql, insert.params(rows))

    def _run(self) -> None:
        while not self._stop.wait(self._flush_s):
            try:
                self.flush()
            except SQLAlchemyError:
                # kept in the queue and shown by readiness; the next tick retries
                log.warning("writing card uses failed: %s", self.last_error)
            for write in self.also:
                try:
                    write()
                except SQLAlchemyError as exc:  # kept by the writer; the next tick retries
                    log.warning("a write after the uses failed: %s", str(exc).splitlines()[0])


def _use_rows(
    batch: list[Queued], contexts: list[dict[str, Any] | None], b: dict[str, Callable[[Any], Any]]
) -> Iterator[Any]:
    """The insert's parameters, row after row (INSERT_COLUMNS each), converted as they go."""
    bind_id, bind_card = b["id"], b["card_id"]
    for (ns, at, _, query_id, uses, _), ctx in zip(batch, contexts, strict=True):
        # converted once per query: every use of it shares them
        ns_v, at_v = b["namespace"](ns), b["used_at"](at)
        ctx_v = b["context"](ctx if ctx is not None else {})
        query_v = b["query_id"](query_id)
        for use_id, card_id, arm in uses:
            yield from (bind_id(use_id), bind_card(card_id), ns_v, at_v, None, ctx_v, arm, query_v)


def _query_rows(
    batch: list[Queued], contexts: list[dict[str, Any] | None], b: dict[str, Callable[[Any], Any]]
) -> Iterator[Any]:
    """The query log insert's parameters (QUERY_COLUMNS each), for queries that keep a row."""
    served = UseArm.served.value
    for (ns, at, _, query_id, uses, asked), ctx in zip(batch, contexts, strict=True):
        if asked is None or query_id is None:
            continue
        key_id, latency_ms, scores = asked
        state, via = (ctx["state"], ctx["via"]) if ctx is not None else ({}, "api")
        arms: dict[bool, list[list[Any]]] = {True: [], False: []}
        for _, card_id, arm in uses:  # best first, as retrieval ranked them
            arms[arm == served].append([str(card_id), round(scores.get(card_id, 0.0), 4)])
        yield from (
            b["query_id"](query_id),
            b["namespace"](ns),
            b["asked_at"](at),
            b["key_id"](key_id),
            b["via"](via[:16]),
            b["state"](state),
            b["served"](arms[True]),
            b["withheld"](arms[False]),
            b["latency_ms"](round(latency_ms, 3)),
        )


def _chunks(values: Iterator[Any], size: int) -> Iterator[list[Any]]:
    """Lists of `size` values (the last may be shorter)."""
    while chunk := list(islice(values, size)):
        yield chunk
