"""Cold loads through a saved snapshot file (serve/snapshot_file.py): a million cards read from
the database took ~29 s of CPU; read from the file, brought current through the change feed.

A file is used only when its header names this database and namespace and the feed still holds
every change since its watermark. The changes since are applied as to any held snapshot; then
the served set must agree with the database's fingerprint (count, newest update, version sum),
and use counts, which change without a feed entry, are read again when their sum differs. Any
doubt means a full load (and the file is written anew after it): a warning, never an error.

Layer: snapshot.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from array import array
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col

from memory_core.db import READ_ONLY, read_session
from memory_core.models.card import Card, CardStatus
from memory_core.models.card_change import CardChange
from memory_core.models.columns import utcnow
from memory_core.serve.changes import Fingerprint, first_seq, last_seq, rows_by_id
from memory_core.serve.index import Stats
from memory_core.serve.index_file import rebuild
from memory_core.serve.saved_orders import encode as encode_orders
from memory_core.serve.saved_orders import fold_backlog, install, take, wait_for_orders
from memory_core.serve.snapshot import Snapshot
from memory_core.serve.snapshot_build import no_full_collections
from memory_core.serve.snapshot_columns import decode, encode
from memory_core.serve.snapshot_file import TMP_SUFFIX, Rejected, file_name, layout
from memory_core.serve.snapshot_file import read as read_file
from memory_core.serve.snapshot_file import write as write_file
from memory_core.serve.snapshot_uses import uses_current
from memory_core.settings import Settings

log = logging.getLogger(__name__)
TRIES = 3  # fingerprint reads when changes land meanwhile
STALE_TMP_S = 3600.0  # a temp file this old is a killed write's: removed
USES_MARGIN_S = 600.0
# a restore that brought more than this share of the cards current writes the file again: the
# changes since a file pile up in the feed (each restart applies them, until it is pruned)
BEHIND_SHARE = 0.05


@dataclass(frozen=True)
class SnapshotFiles:
    """Where namespaces' files go, and the fewest cards that get one."""

    folder: Path
    min_cards: int
    behind: set[str] = field(default_factory=set, compare=False)  # restored far behind

    def path(self, namespace: str) -> Path:
        """The namespace's file."""
        return self.folder / file_name(namespace)

    def wanted(self, snap: Snapshot) -> bool:
        """A full load big enough to be saved, or a restore that was far behind."""
        fresh = not snap.from_file or snap.namespace in self.behind
        return fresh and len(snap.entries) >= self.min_cards


def snapshot_files(settings: Settings) -> SnapshotFiles | None:
    """The settings' snapshot files (None: turned off)."""
    n = settings.serve.snapshot_file_min_cards
    return SnapshotFiles(settings.data_dir / "snapshots", n) if n > 0 else None


def db_identity(engine: Engine) -> str:
    """What tells this database from another: its URL (no password), its schema revision, and
    on PostgreSQL the database's oid (a database dropped and made again under the name)."""
    parts = [engine.url.render_as_string(hide_password=True)]
    with engine.connect().execution_options(**READ_ONLY) as conn:
        parts.append(str(conn.execute(text("SELECT version_num FROM alembic_version")).scalar()))
        if engine.dialect.name == "postgresql":
            oid = "SELECT oid FROM pg_database WHERE datname = current_database()"
            parts.append(str(conn.execute(text(oid)).scalar()))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cold_load(
    loader: Callable[..., Snapshot],
    files: SnapshotFiles | None,
    *,
    engine: Engine,
    namespace: str,
) -> Snapshot:
    """The namespace from its file when there is one it can trust, else from `loader`."""
    if files is None:
        return loader(engine=engine, namespace=namespace)
    path = files.path(namespace)
    if path.exists():
        try:
            snap, behind = _restore(engine, namespace, path)
        except Rejected as exc:
            log.warning(
                "snapshot file %s not used (%s): loading %r from the database",
                path,
                exc.reason,
                namespace,
            )
            _drop(path)  # written anew after the full load when still big
        else:
            if behind > BEHIND_SHARE * len(snap.entries):
                files.behind.add(namespace)
            return snap
    return loader(engine=engine, namespace=namespace)


@dataclass
class _Found:
    """The database's side of a restore: its fingerprint and use sum, read before the
    namespace's changes since the watermark (and the changed cards still active)."""

    fingerprint: Fingerprint
    uses: int
    changes: dict[uuid.UUID, int]
    rows: list[Any]


def _restore(engine: Engine, namespace: str, path: Path) -> tuple[Snapshot, int]:
    """The snapshot and how many of its cards were brought current (changes, uses)."""
    try:
        f = open(path, "rb")  # noqa: SIM115  # held through the sections' reads
    except OSError as exc:
        raise Rejected(f"unreadable: {exc}") from exc
    with f:
        snap, found, header = _read(engine, namespace, path, f)
    behind = 0
    for _ in range(TRIES):
        behind += len(found.changes)
        if found.changes:
            snap.apply(list(found.changes), found.rows)
            snap.watermark = max(snap.watermark, *found.changes.values())
        if snap.local_fingerprint() == found.fingerprint:
            break
        # a change landed between the fingerprint and the feed's read: read both again
        found = _read_db(engine, namespace, snap.watermark)
    else:
        raise Rejected("brought current from the feed, its cards still differ from the database's")
    behind += uses_current(engine, snap, db_uses=found.uses, since=header.get("uses_since"))
    snap.max_uses = max((e.use_count for e in snap.entries.values()), default=0)
    fold_backlog(snap)
    log.info(
        "%r read from %s: %d cards, %d brought current, %d lists ordered",
        namespace,
        path,
        len(snap.entries),
        behind,
        len(snap.orders),
    )
    return snap, behind


def _read(
    engine: Engine, namespace: str, path: Path, f: IO[bytes]
) -> tuple[Snapshot, _Found, dict[str, Any]]:
    """The snapshot as the file holds it (with its saved orders), and the database's side."""
    header, body = read_file(f)
    if header.get("db") != db_identity(engine):
        raise Rejected("written for another database or schema revision")
    if header.get("namespace") != namespace:
        raise Rejected(f"written for namespace {header.get('namespace')!r}")
    watermark, n = header.get("watermark"), header.get("cards")
    if not isinstance(watermark, int) or isinstance(watermark, bool):
        raise Rejected("no watermark")
    if type(n) is not int or n < 0:
        raise Rejected("no card count")
    with read_session(engine) as session:  # before decoding: a file past its feed is not read
        if last_seq(session) < watermark:
            raise Rejected("the database's change feed ends before the file's watermark")
        if first_seq(session) > watermark + 1:
            raise Rejected("the change feed was pruned past the file's watermark")
    # the database's side on the other core while the file is decoded (its queries run
    # without the GIL): a second of a million cards' load off the wall time
    with ThreadPoolExecutor(1, thread_name_prefix="snapshot-file") as pool:
        ahead = pool.submit(_read_db, engine, namespace, watermark)
        saved = decode(body, n)
        stats = Stats()
        stats.atoms = saved.atoms
        entries = saved.entries
        positions: dict[int, array[int]] = {}
        index = rebuild(entries, saved.filed, saved.needs, saved.readers, positions)
        cards = dict(zip([e.card_id for e in entries], entries, strict=True))
        if len(cards) != n:
            raise Rejected("a card id twice")
        snap = Snapshot(
            namespace, cards, index, stats, watermark, from_file=True, profiles=saved.profiles
        )
        # before the feed's changes: they replace lists, which the queries then patch
        install(snap, body, saved, positions)
        del positions
        found = ahead.result()
    return snap, found, header


def _read_db(engine: Engine, namespace: str, watermark: int) -> _Found:
    """The fingerprint first, then the changes since the watermark: a change committed in
    between is applied beyond the fingerprint, and the next try reads both again."""
    with read_session(engine) as session:
        count, newest, versions, uses = session.execute(
            select(
                func.count(),
                func.max(col(Card.updated_at)),
                func.sum(col(Card.version)),
                func.sum(col(Card.use_count)),
            ).where(col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value)
        ).one()
        changes = dict(
            session.execute(
                select(col(CardChange.card_id), col(CardChange.seq))
                .where(col(CardChange.namespace) == namespace, col(CardChange.seq) > watermark)
                .order_by(col(CardChange.seq))
            ).all()
        )
        rows = rows_by_id(session, namespace, list(changes)) if changes else []
    return _Found((int(count), newest, int(versions or 0)), int(uses or 0), changes, rows)


def save(engine: Engine, files: SnapshotFiles, snap: Snapshot) -> Path | None:
    """Write the snapshot's file when the namespace is big enough (None: not written). Its
    cards are copied under the snapshot's lock with the watermark they are current at."""
    if len(snap.entries) < files.min_cards:  # a file-loaded one is saved too (benches, tools)
        return None
    # uses written after the load read the cards are read again on a restore: from when the
    # load began, less USES_MARGIN for uses queued meanwhile and clocks apart
    ago = time.monotonic() - snap.loaded_at + snap.load_s
    since = utcnow() - timedelta(seconds=ago + USES_MARGIN_S)
    wait_for_orders(snap)
    with snap.lock:
        entries = list(snap.entries.values())
        watermark, atoms = snap.watermark, snap.stats.atoms.copy()
        readers = {var: dict(kept) for var, kept in snap.index.readers.items()}
        taken = take(snap)
        profiles = dict(snap.profiles)
    try:
        identity = db_identity(engine)
    except SQLAlchemyError as exc:
        log.warning("snapshot file of %r not written: %s", snap.namespace, exc)
        return None
    path = files.path(snap.namespace)
    header = {
        "db": identity,
        "namespace": snap.namespace,
        "watermark": watermark,
        "uses_since": since.isoformat(),
        "cards": len(entries),
        "written_at": utcnow().isoformat(),
    }
    try:
        _drop_stale(path)
        with no_full_collections():  # its passes over what encoding makes: 3 s of 10 at 1M
            sections = encode(entries, atoms, readers, profiles)
            position = {id(e): i for i, e in enumerate(entries)}
            sections += encode_orders(snap, taken, position)
        header["sections"], body = layout(sections)
        write_file(path, header, body)
        files.behind.discard(snap.namespace)
        log.info("%r saved to %s: %d cards", snap.namespace, path, len(entries))
    # disk full; an integer past 64 bits (orjson's, the columns')
    except (OSError, orjson.JSONEncodeError, OverflowError) as exc:
        log.warning("snapshot file %s not written: %s", path, exc)
        return None
    return path


def _drop(path: Path) -> None:
    """Remove a file not used; one that cannot be removed is only logged (read again later)."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("snapshot file %s not removed: %s", path, exc)


def _drop_stale(path: Path) -> None:
    """Remove temp files of killed writes (a live writer's is younger than STALE_TMP_S)."""
    for tmp in path.parent.glob(f"{path.name}.*{TMP_SUFFIX}"):
        try:
            if time.time() - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink()
        except FileNotFoundError:  # another process removed it meanwhile
            continue
