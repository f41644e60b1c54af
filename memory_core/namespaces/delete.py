"""Delete a namespace leaving nothing of it: its rows, its index points and its snapshot file.

Safe to re-run after a crash half-way: every step deletes what is left of the namespace in its
table, in its own transaction. On SQLite the deleting connection sets `secure_delete`, so freed
pages are zeroed rather than left holding the text, and the write-ahead log is checkpointed and
truncated at the end; PostgreSQL keeps deleted tuples in its files until VACUUM reclaims them
(not SQL-visible; `VACUUM` the tables after a deletion that must leave no bytes on disk)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, text

from memory_core.erase import flush_log, zero_freed
from memory_core.errors import InvalidInput
from memory_core.models.card_change import CardChange, keys_changed
from memory_core.models.columns import utcnow
from memory_core.models.namespace_deletion import NamespaceDeletion
from memory_core.namespaces.plan import STEPS
from memory_core.settings import Settings


@dataclass
class Deletion:
    """What one run of a deletion removed (rows by table, files, index points)."""

    namespace: str
    rows: dict[str, int] = field(default_factory=dict)
    files: int = 0
    vectors: int = 0

    @property
    def total(self) -> int:
        """Rows removed, all tables."""
        return sum(self.rows.values())


def namespace_hash(namespace: str) -> str:
    """How the deletions' record names a namespace (never its text)."""
    return hashlib.sha256(namespace.encode()).hexdigest()


def delete_namespace(
    *,
    engine: Engine,
    settings: Settings,
    namespace: str,
    actor: str,
    on_step: Callable[[str, int], None] | None = None,
) -> Deletion:
    """Delete every row, index point and snapshot file of `namespace`, and record the deletion."""
    if not namespace.strip():
        raise InvalidInput("the namespace to delete is empty", field="namespace")
    started = utcnow()
    out = Deletion(namespace)
    out.vectors = _delete_vectors(engine, settings, namespace)
    if on_step:
        on_step("index", out.vectors)
    for table, where in STEPS:
        with engine.begin() as conn:
            zero_freed(conn)  # freed pages are zeroed, not left holding the deleted text
            result = conn.execute(text(f"DELETE FROM {table} WHERE {where}"), {"ns": namespace})
            out.rows[table] = cast(CursorResult[Any], result).rowcount
            if table == "api_key" and out.rows[table]:  # servers drop the keys they cached
                conn.execute(CardChange.__table__.insert(), [keys_changed()])  # type: ignore[attr-defined]
        if on_step:
            on_step(table, out.rows[table])
    out.files = _delete_files(settings, namespace)
    with engine.begin() as conn:
        conn.execute(
            NamespaceDeletion.__table__.insert(),  # type: ignore[attr-defined]
            [
                NamespaceDeletion(
                    namespace_sha256=namespace_hash(namespace),
                    actor=actor,
                    started_at=started,
                    finished_at=utcnow(),
                    rows=out.rows,
                    files=out.files,
                    vectors=out.vectors,
                ).model_dump()
            ],
        )
    flush_log(engine)  # the zeroed pages reach the database file and the log is emptied
    return out


def _delete_vectors(engine: Engine, settings: Settings, namespace: str) -> int:
    """Remove the namespace's points from the vector index, when there is one."""
    if not settings.qdrant.url and not (settings.data_dir / "index" / "shard").exists():
        return 0
    with engine.connect() as conn:
        dim = conn.execute(text("SELECT dim FROM card_embedding LIMIT 1")).scalar()
    if dim is None:  # no vectors were ever stored: the index holds none of this namespace's
        return 0
    from memory_core.index.edge import EdgeIndex
    from memory_core.index.factory import open_index

    index = open_index(settings, dim=int(dim))
    try:
        ids = index.ids(namespace=namespace)
        index.delete(sorted(ids))
        if isinstance(index, EdgeIndex) and ids:  # its files keep deleted payloads until then
            index.rewrite()
        return len(ids)
    finally:
        index.close()


def _delete_files(settings: Settings, namespace: str) -> int:
    """Remove the namespace's files: its snapshot (and any half-written copy), its cached item
    vectors and its validation reports."""
    from memory_core.recall.vectors import vector_cache_path
    from memory_core.serve.snapshot_file import file_name
    from memory_core.validate.summary import report_folder

    gone = 0
    folder = settings.data_dir / "snapshots"
    if folder.is_dir():
        name = file_name(namespace)
        for path in folder.iterdir():
            if path.name == name or path.name.startswith(name + "."):
                path.unlink(missing_ok=True)
                gone += 1
    vectors = vector_cache_path(data_dir=settings.data_dir, namespace=namespace)
    if vectors.is_file():
        vectors.unlink()
        gone += 1
    reports = report_folder(settings.reports_dir, namespace)
    if reports.is_dir():
        gone += sum(1 for p in reports.rglob("*") if p.is_file())
        shutil.rmtree(reports)
    return gone
