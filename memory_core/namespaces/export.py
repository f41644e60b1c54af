"""Export a namespace as JSON Lines, streamed: a header, then its runs, cards (facts with their
validity among them), card versions and evidence, each in id order so a dump is canonical."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import Engine, Select, Table, Text, cast, select

from memory_core.errors import InvalidInput
from memory_core.namespaces.lines import (
    FORMAT,
    JSON_COLUMNS,
    VERSION,
    dumps,
    encode,
    summary_of,
    table_of,
)
from memory_core.schema_new import head_revision

_BATCH = 2000


def _select(table: Table) -> Select[Any]:
    """Every column, JSON ones as their text: orjson parses it several times faster than the
    driver's json module, and the line sorts the keys anyway."""
    return select(
        *(cast(c, Text).label(c.name) if c.name in JSON_COLUMNS[table.name] else c for c in table.c)
    )


def header(namespace: str, *, with_trajectories: bool) -> dict[str, Any]:
    """The first line: the format, its version, the schema it was written from."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "schema": head_revision(),
        "namespace": namespace,
        "with_trajectories": with_trajectories,
    }


def export_lines(
    *, engine: Engine, namespace: str, with_trajectories: bool = False
) -> Iterator[bytes]:
    """The namespace's lines, one bytes object each (newline included), read in batches.
    Without trajectories, the runs its evidence cites are given in summary form (no steps)."""
    for _, line in _records(engine, namespace, with_trajectories):
        yield line


def _records(
    engine: Engine, namespace: str, with_trajectories: bool
) -> Iterator[tuple[str, bytes]]:
    """(record type, line) for the header ("") and each record."""
    if not namespace.strip():
        raise InvalidInput("the namespace to export is empty", field="namespace")
    yield "", dumps(header(namespace, with_trajectories=with_trajectories))
    runs, cards = table_of("trajectory"), table_of("card")
    versions, evidence = table_of("card_version"), table_of("card_evidence")
    of_ns = select(cards.c.card_id).where(cards.c.namespace == namespace)
    with engine.connect() as conn:
        conn = conn.execution_options(yield_per=_BATCH)
        if with_trajectories:
            q = _select(runs).where(runs.c.namespace == namespace)
        else:
            cited = select(evidence.c.trajectory_id).where(evidence.c.card_id.in_(of_ns))
            q = _select(runs).where(runs.c.namespace == namespace, runs.c.id.in_(cited))
        for row in conn.execute(q.order_by(runs.c.id)):
            record = encode("trajectory", row)
            if not with_trajectories:
                record["row"] = summary_of(record["row"])
            yield "trajectory", dumps(record)
        for kind, q in (
            (
                "card",
                _select(cards).where(cards.c.namespace == namespace).order_by(cards.c.card_id),
            ),
            (
                "card_version",
                _select(versions)
                .where(versions.c.card_id.in_(of_ns))
                .order_by(versions.c.card_id, versions.c.version),
            ),
            (
                "card_evidence",
                _select(evidence)
                .where(evidence.c.card_id.in_(of_ns))
                .order_by(evidence.c.card_id, evidence.c.trajectory_id, evidence.c.step),
            ),
        ):
            for row in conn.execute(q):
                yield kind, dumps(encode(kind, row))


def export_namespace(
    *,
    engine: Engine,
    namespace: str,
    write: Callable[[bytes], Any],
    with_trajectories: bool = False,
) -> Counter[str]:
    """Write the namespace's lines through `write`; the records written by type."""
    counts: Counter[str] = Counter()
    for kind, line in _records(engine, namespace, with_trajectories):
        write(line)
        if kind:
            counts[kind] += 1
    return counts
