"""The use writer's statements (serve/uses.py): many rows per statement, compiled once per
engine and row count.

Why many rows per statement: the driver gives the GIL back around every statement it runs
(sqlite3 around each step, so each row of an executemany), and under load the event loop holds
it: each hand-back then waits out a switch interval (5 ms). Row by row, the writer wrote nothing
for 16 s of a 4,000 req/s run at 5,000 cards while its queue grew (and every full collection
walked the queue). A chunk of rows is one hand-back.

Layer: service.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.engine import Dialect

from memory_core.models.card import Card, CardUse
from memory_core.models.query_log import QueryLog

# rows per statement: 8 (a use) or 9 (a query) x 100 parameters stay under SQLite's oldest
# limit (999)
CHUNK = 100

INSERT_COLUMNS = ("id", "card_id", "namespace", "used_at", "outcome", "context", "arm", "query_id")
QUERY_COLUMNS = (
    "query_id",
    "namespace",
    "asked_at",
    "key_id",
    "via",
    "state",
    "served",
    "withheld",
    "latency_ms",
)
UPDATE_COLUMNS = ("n", "at", "cid")  # per card: served uses, the latest use, the card id


def _bind(table: Any, column: str, dialect: Dialect) -> Callable[[Any], Any]:
    """The column type's conversion of a Python value for this driver (as SQLAlchemy binds
    it: a UUID as hex text on SQLite, a UTC datetime without zone there, JSON as text)."""
    process = table.c[column].type.dialect_impl(dialect).bind_processor(dialect)
    return process if process is not None else (lambda value: value)


def _insert(
    rows: int, table: str = CardUse.__tablename__, columns: Sequence[str] = INSERT_COLUMNS
) -> Any:
    values = ", ".join("(" + ", ".join(f":{c}_{i}" for c in columns) + ")" for i in range(rows))
    return text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES {values}")


def _update(cards: int) -> Any:
    """Each card's served uses added and its latest use set, for cards of one namespace (typed
    parameters: PostgreSQL types a VALUES list from them, so they are cast there)."""
    card = Card.__table__.c  # type: ignore[attr-defined]
    values = ", ".join(f"(:n_{i}, :at_{i}, :cid_{i})" for i in range(cards))
    table = Card.__tablename__
    # a join on the key: as `card_id IN (...) AND namespace = ...` SQLite walked every card of
    # the namespace by its index, once per statement
    statement = text(
        f"WITH v(n, at, cid) AS (VALUES {values}) "
        f"UPDATE {table} SET use_count = use_count + v.n, last_used_at = v.at, "
        "decay_tier = 0 "  # used again: every decay tier may apply again later
        f"FROM v WHERE {table}.card_id = v.cid AND {table}.namespace = :ns"
    )
    typed = [bindparam("ns", type_=card.namespace.type)]
    for i in range(cards):
        typed += [
            bindparam(f"n_{i}", type_=card.use_count.type),
            bindparam(f"at_{i}", type_=card.last_used_at.type),
            bindparam(f"cid_{i}", type_=card.card_id.type),
        ]
    return statement.bindparams(*typed)


def _lock(cards: int) -> Any:
    """PostgreSQL: the cards' rows locked in key order first, so writers in other processes
    that update some of the same cards wait instead of deadlocking."""
    ids = ", ".join(f":cid_{i}" for i in range(cards))
    card = Card.__table__.c  # type: ignore[attr-defined]
    statement = text(
        f"SELECT card_id FROM {Card.__tablename__} WHERE card_id IN ({ids}) "
        "AND namespace = :ns ORDER BY card_id FOR UPDATE"
    )
    typed = [bindparam("ns", type_=card.namespace.type)]
    typed += [bindparam(f"cid_{i}", type_=card.card_id.type) for i in range(cards)]
    return statement.bindparams(*typed)


class _Compiled:
    """One statement compiled for a dialect, and its parameters shaped for the driver."""

    def __init__(self, statement: Any, dialect: Dialect, names: list[str]) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = str(compiled)
        self.names = names
        order = compiled.positiontup if dialect.positional else None
        if order is not None and list(order) != names:
            raise RuntimeError(f"unexpected parameter order {order[:8]}...")
        self.named = order is None

    def params(self, values: Sequence[Any]) -> Any:
        """The values (in `names` order) as the driver takes them."""
        return dict(zip(self.names, values, strict=True)) if self.named else tuple(values)


class UseStatements:
    """The writer's statements for one engine's dialect, each column's bind conversion, and
    each statement compiled once per row count (at most CHUNK of each)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        uses = CardUse.__table__  # type: ignore[attr-defined]
        # card.card_id and card.last_used_at have the types of card_use.card_id and used_at
        self.bind = {c: _bind(uses, c, dialect) for c in INSERT_COLUMNS}
        queries = QueryLog.__table__  # type: ignore[attr-defined]
        self.bind_query = {c: _bind(queries, c, dialect) for c in QUERY_COLUMNS}
        self.locks = dialect.name == "postgresql"
        self._cache: dict[tuple[str, int], _Compiled] = {}

    def insert(self, rows: int) -> _Compiled:
        """INSERT of `rows` use rows (parameters: each row's INSERT_COLUMNS in turn)."""
        names = lambda: [f"{c}_{i}" for i in range(rows) for c in INSERT_COLUMNS]  # noqa: E731
        return self._compiled("insert", rows, lambda: _insert(rows), names)

    def insert_queries(self, rows: int) -> _Compiled:
        """INSERT of `rows` query log rows (parameters: each row's QUERY_COLUMNS in turn)."""
        names = lambda: [f"{c}_{i}" for i in range(rows) for c in QUERY_COLUMNS]  # noqa: E731
        build = lambda: _insert(rows, QueryLog.__tablename__, QUERY_COLUMNS)  # noqa: E731
        return self._compiled("queries", rows, build, names)

    def update(self, cards: int) -> _Compiled:
        """UPDATE of `cards` cards of one namespace (parameters: each card's UPDATE_COLUMNS
        in turn, then the namespace)."""
        names = lambda: [f"{c}_{i}" for i in range(cards) for c in UPDATE_COLUMNS]  # noqa: E731
        return self._compiled("update", cards, lambda: _update(cards), names)

    def lock(self, cards: int) -> _Compiled:
        """SELECT ... FOR UPDATE of `cards` cards of one namespace (parameters: the card ids,
        then the namespace)."""
        names = lambda: [f"cid_{i}" for i in range(cards)]  # noqa: E731
        return self._compiled("lock", cards, lambda: _lock(cards), names)

    def _compiled(
        self, kind: str, n: int, build: Callable[[], Any], names: Callable[[], list[str]]
    ) -> _Compiled:
        """The statement of this kind and row count, compiled on its first use (its parameter
        names too, built only then: a flush asks for a statement per chunk)."""
        if not 0 < n <= CHUNK:
            raise ValueError(f"{n} rows in one statement (1 to {CHUNK})")
        found = self._cache.get((kind, n))
        if found is None:
            extra = ["ns"] if kind in ("update", "lock") else []
            found = self._cache[(kind, n)] = _Compiled(build(), self.dialect, names() + extra)
        return found
