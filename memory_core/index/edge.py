"""The embedded Qdrant engine (qdrant-edge-py): one shard under the data directory.

One process at a time: opening takes an exclusive lock on `<path>/lock` (and the engine's
write-ahead log holds its own), so a second opener gets IndexUnavailable instead of a
corrupted shard. The shard persists: close it, open the same path, the points are there.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
import qdrant_edge as qe

from memory_core.errors import IndexUnavailable, InvalidInput
from memory_core.index.base import KIND, NAMESPACE, IndexPoint

SCROLL_PAGE = 10_000


class EdgeIndex:
    """A VectorIndex on qdrant-edge-py; the shard lives in `<path>/shard`."""

    def __init__(self, *, path: Path, dim: int, recreate: bool = False) -> None:
        if dim < 1:
            raise InvalidInput(f"vector dimension must be positive, got {dim}", field="dim")
        self.dim = dim
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self._lock = _take_lock(path / "lock")
        try:
            shard_dir = path / "shard"
            if not shard_dir.exists() and (path / "shard.new").exists():  # a rewrite's swap
                os.rename(path / "shard.new", shard_dir)
            if recreate and shard_dir.exists():
                shutil.rmtree(shard_dir)
            self._shard = _open_shard(shard_dir, dim)
        except BaseException:
            self._lock.close()
            raise

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or overwrite points; the point id is the card id."""
        if not points:
            return
        batch = []
        for p in points:
            vec = np.asarray(p.vector, dtype=np.float32)
            if vec.shape != (self.dim,):
                raise InvalidInput(
                    f"vector of {vec.size} dimensions, the index holds {self.dim}",
                    record=str(p.card_id),
                    field="vector",
                )
            batch.append(qe.Point(p.card_id, vec.tolist(), p.payload()))
        self._shard.update(qe.UpdateOperation.upsert_points(batch))

    def delete(self, card_ids: Sequence[uuid.UUID]) -> None:
        """Remove points by card id (unknown ids are ignored)."""
        if card_ids:
            self._shard.update(qe.UpdateOperation.delete_points(list(card_ids)))

    def search(
        self, *, vector: Sequence[float], namespace: str, kind: str | None = None, limit: int = 10
    ) -> list[tuple[uuid.UUID, float]]:
        """Nearest cards by cosine similarity, filtered inside the engine."""
        vec = np.asarray(vector, dtype=np.float32)
        if vec.shape != (self.dim,):
            raise InvalidInput(f"query of {vec.size} dimensions, the index holds {self.dim}")
        if limit < 1:
            return []
        hits = self._shard.query(
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(vec.tolist()),
                filter=_filter(namespace, kind),
                with_payload=False,
                with_vector=False,
            )
        )
        return [(_uuid(h.id), float(h.score)) for h in hits]

    def ids(self, *, namespace: str | None = None) -> set[uuid.UUID]:
        """Every point id, paging through the shard."""
        out: set[uuid.UUID] = set()
        flt = None if namespace is None else _filter(namespace, None)
        offset: qe.PointId | None = None
        while True:
            records, offset = self._shard.scroll(
                qe.ScrollRequest(
                    offset=offset,
                    limit=SCROLL_PAGE,
                    filter=flt,
                    with_payload=False,
                    with_vector=False,
                )
            )
            out.update(_uuid(r.id) for r in records)
            if offset is None:
                return out

    def rewrite(self) -> None:
        """Write the shard afresh from its live points: a deleted point's payload stays in the
        engine's log and segments until then. Built beside the old one and swapped in by
        renames; a crash between them leaves `shard.new`, taken up by the next open."""
        points: list[qe.Point] = []
        offset: qe.PointId | None = None
        while True:
            records, offset = self._shard.scroll(
                qe.ScrollRequest(
                    offset=offset, limit=SCROLL_PAGE, with_payload=True, with_vector=True
                )
            )
            points += [qe.Point(r.id, r.vector, r.payload) for r in records]  # type: ignore[arg-type]
            if offset is None:
                break
        cur, new, old = self.path / "shard", self.path / "shard.new", self.path / "shard.old"
        shutil.rmtree(new, ignore_errors=True)
        fresh = _open_shard(new, self.dim)
        for start in range(0, len(points), SCROLL_PAGE):
            fresh.update(qe.UpdateOperation.upsert_points(points[start : start + SCROLL_PAGE]))
        fresh.flush()
        fresh.close()
        self._shard.close()
        shutil.rmtree(old, ignore_errors=True)
        os.rename(cur, old)
        os.rename(new, cur)
        shutil.rmtree(old)
        self._shard = _open_shard(cur, self.dim)

    def close(self) -> None:
        """Flush the shard and release the lock (safe to call twice)."""
        if self._lock.closed:
            return
        try:
            self._shard.flush()
            self._shard.close()
        finally:
            self._lock.close()


def _take_lock(lock_path: Path) -> IO[str]:
    handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - held until close()
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        handle.close()
        raise IndexUnavailable(
            f"the vector index at {lock_path.parent} is open in another process "
            "(the embedded engine allows one process at a time; use a Qdrant server "
            "via HINDSIGHT_QDRANT__URL for several)"
        ) from exc
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _open_shard(shard_dir: Path, dim: int) -> qe.EdgeShard:
    config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine))
    stored = shard_dir / "edge_config.json"
    if not stored.exists():
        shard = qe.EdgeShard.create(str(shard_dir), config)
        # keyword indexes make the namespace/kind filter cheap at any size
        for key in (NAMESPACE, KIND):
            shard.update(qe.UpdateOperation.create_field_index(key, qe.PayloadSchemaType.Keyword))
        return shard
    params = json.loads(stored.read_text(encoding="utf-8")).get("vectors", {}).get("", {})
    if params.get("size") != dim or params.get("distance") != "Cosine":
        raise IndexUnavailable(
            f"the vector index at {shard_dir.parent} holds {params.get('size')}-d "
            f"{params.get('distance')} vectors, the embedder makes {dim}-d Cosine ones; "
            "rebuild it with `hindsight index rebuild --recreate`"
        )
    try:
        return qe.EdgeShard.load(str(shard_dir), config)
    except Exception as exc:  # the engine raises bare Exception; name the cause and the path
        raise IndexUnavailable(f"cannot open the vector index at {shard_dir}: {exc}") from exc


def _filter(namespace: str, kind: str | None) -> qe.Filter:
    must: list[qe.ConditionType] = [
        qe.FieldCondition(key=NAMESPACE, match=qe.MatchValue(namespace))
    ]
    if kind is not None:
        must.append(qe.FieldCondition(key=KIND, match=qe.MatchValue(kind)))
    return qe.Filter(must=must)


def _uuid(point_id: qe.PointId) -> uuid.UUID:
    return point_id if isinstance(point_id, uuid.UUID) else uuid.UUID(str(point_id))
