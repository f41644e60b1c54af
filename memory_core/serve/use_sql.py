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
# parameters per row of each kind of statement
_COLUMNS = {"insert": len(INSERT_COLUMNS), "queries": len(QUERY_COLUMNS), "update": 3, "lock": 1}


def _names(columns: Sequence[str]) -> Callable[[int], list[str]]:
    """The parameter names of a statement of n rows of these columns, row after row."""
    return lambda n: [f"{c}_{i}" for i in range(n) for c in columns]


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

    def __init__(self, sql: str, names: list[str], *, named: bool) -> None:
        self.sql = sql
        self.names = names
        self.named = named
        self._ends: list[int] | None = None  # where each VALUES row ends (`first`)

    @classmethod
    def of(cls, statement: Any, dialect: Dialect, names: list[str]) -> _Compiled:
        """The statement compiled by SQLAlchemy (its parameters in `names` order)."""
        compiled = statement.compile(dialect=dialect)
        order = compiled.positiontup if dialect.positional else None
        if order is not None and list(order) != names:
            raise RuntimeError(f"unexpected parameter order {order[:8]}...")
        return cls(str(compiled), names, named=order is None)

    def first(self, rows: int, columns: int, extra: int) -> _Compiled:
        """This statement of CHUNK rows cut to its first `rows` rows: the same text and
        parameters as the statement of `rows` rows compiled (each row's text is its own
        parameters', in order), without compiling it, which cost ~8 ms a size."""
        if self._ends is None:
            self._ends = _row_ends(self.sql)
        ends = self._ends
        if len(ends) != CHUNK:
            raise RuntimeError(f"{len(ends)} rows found in a statement of {CHUNK}")
        sql = self.sql[: ends[rows - 1]] + self.sql[ends[-1] :]
        tail = self.names[len(self.names) - extra :] if extra else []
        return _Compiled(sql, self.names[: rows * columns] + tail, named=self.named)

    def params(self, values: Sequence[Any]) -> Any:
        """The values (in `names` order) as the driver takes them."""
        return dict(zip(self.names, values, strict=True)) if self.named else tuple(values)


def _row_ends(sql: str) -> list[int]:
    """Where each row of the statement's VALUES list ends (just past its closing parenthesis);
    the list ends at the first parenthesis it did not open (a CTE's) or the text's end."""
    ends, depth = [], 0
    for i in range(sql.index("VALUES ") + len("VALUES "), len(sql)):
        c = sql[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                break
            if depth == 0:
                ends.append(i + 1)
    return ends


class UseStatements:
    """The writer's statements for one engine's dialect, each column's bind conversion, and
    each statement made once per row count (at most CHUNK of each)."""

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
        return self._compiled("insert", rows, _insert, _names(INSERT_COLUMNS))

    def insert_queries(self, rows: int) -> _Compiled:
        """INSERT of `rows` query log rows (parameters: each row's QUERY_COLUMNS in turn)."""
        build = lambda n: _insert(n, QueryLog.__tablename__, QUERY_COLUMNS)  # noqa: E731
        return self._compiled("queries", rows, build, _names(QUERY_COLUMNS))

    def update(self, cards: int) -> _Compiled:
        """UPDATE of `cards` cards of one namespace (parameters: each card's UPDATE_COLUMNS
        in turn, then the namespace)."""
        return self._compiled("update", cards, _update, _names(UPDATE_COLUMNS))

    def lock(self, cards: int) -> _Compiled:
        """SELECT ... FOR UPDATE of `cards` cards of one namespace (parameters: the card ids,
        then the namespace)."""
        return self._compiled("lock", cards, _lock, _names(("cid",)))

    def _compiled(
        self, kind: str, n: int, build: Callable[[int], Any], names: Callable[[int], list[str]]
    ) -> _Compiled:
        """The statement of this kind and row count: the kind's statement of CHUNK rows is
        compiled on its first use (its parameter names too, built only then), and each other
        row count is cut from it (a flush's last chunk has any size up to CHUNK)."""
        if not 0 < n <= CHUNK:
            raise ValueError(f"{n} rows in one statement (1 to {CHUNK})")
        found = self._cache.get((kind, n))
        if found is None:
            extra = ["ns"] if kind in ("update", "lock") else []
            if kind == "lock":  # no VALUES list to cut (PostgreSQL only): compiled per size
                statement = _Compiled.of(build(n), self.dialect, names(n) + extra)
                self._cache[(kind, n)] = statement
                return statement
            full = self._cache.get((kind, CHUNK))
            if full is None:
                full = _Compiled.of(build(CHUNK), self.dialect, names(CHUNK) + extra)
                self._cache[(kind, CHUNK)] = full
            found = full if n == CHUNK else full.first(n, _COLUMNS[kind], len(extra))
            self._cache[(kind, n)] = found
        return found
