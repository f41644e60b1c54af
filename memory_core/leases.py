"""Leases on batch work (a stage on a namespace), so several workers share a backlog: whoever
holds a namespace's lease does its work, the others pass on to the next namespace.

A run keeps every lease it took until it ends, so two runs at once never both work on one
namespace; a run that starts after another has ended goes over the namespaces again and
finds nothing left to do (the stages are idempotent: a tier fades a card once, a merge
leaves no duplicate behind).

No table: on PostgreSQL session advisory locks on one connection of the run's own; on SQLite
(one machine) an exclusive `flock` per namespace on files beside the database. Both end with
the holder's process, so a worker killed mid-stage frees its namespaces at once, with no
expiry to wait for and no stale row to clean up.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

T = TypeVar("T")
# as memory_core.settings_groups.RetrospectSettings.stale_after_seconds by default
STALE_AFTER = timedelta(seconds=90)


def lease_key(*, stage: str, namespace: str) -> int:
    """A signed 64-bit key for the (stage, namespace) pair (PostgreSQL's advisory lock key)."""
    digest = hashlib.sha256(f"hindsight-lease\0{stage}\0{namespace}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Leases:
    """The leases one run holds on one stage's namespaces, all released when it ends."""

    def __init__(self, *, engine: Engine, stage: str) -> None:
        self.engine, self.stage = engine, stage
        self._conn: Connection | None = None
        self._files: dict[str, int] = {}

    def __enter__(self) -> Leases:
        if self.engine.dialect.name == "postgresql":
            # a connection of its own: the locks live as long as this session, whatever the
            # stage's transactions do; closing it (or the process dying) releases them all
            self._conn = self.engine.connect()
        return self

    def take(self, namespace: str) -> bool:
        """True when this run now holds the namespace; False when another run does (no wait)."""
        key = lease_key(stage=self.stage, namespace=namespace)
        if self._conn is not None:
            got = self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
            self._conn.commit()
            return bool(got)
        if namespace in self._files:
            return True
        folder = _lock_dir(self.engine)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{key & 0xFFFFFFFFFFFFFFFF:016x}.lock"
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._files[namespace] = fd
        return True

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._conn is not None:
            self._conn.execute(text("SELECT pg_advisory_unlock_all()"))
            self._conn.commit()
            self._conn.close()
            self._conn = None
        for fd in self._files.values():
            os.close(fd)  # closing the file releases its flock
        self._files.clear()


def _lock_dir(engine: Engine) -> Path:
    database = engine.url.database
    if not database or database == ":memory:":
        raise ValueError("a lease on SQLite needs a database file")
    return Path(database).resolve().parent / "leases"


def each_leased(
    *, engine: Engine, stage: str, namespaces: Iterable[str], run: Callable[[str], T]
) -> tuple[list[tuple[str, T]], list[str]]:
    """Run the stage on each namespace whose lease this run gets: (namespace, result) of those
    it ran, and the namespaces another run held (theirs to finish, so none is lost)."""
    done: list[tuple[str, T]] = []
    elsewhere: list[str] = []
    with Leases(engine=engine, stage=stage) as leases:
        for ns in namespaces:
            if leases.take(ns):
                done.append((ns, run(ns)))
            else:
                elsewhere.append(ns)
    return done, elsewhere


def card_namespaces(*, engine: Engine) -> list[str]:
    """Namespaces that hold cards (of any status): what decay runs over."""
    from sqlmodel import Session, col, select

    from memory_core.models.card import Card

    with Session(engine) as session:
        return sorted(session.execute(select(col(Card.namespace)).distinct()).scalars())


# Trajectory claims (status "processing", lease_owner, lease_until) are rows, not locks: a
# worker killed mid-batch would leave them until lease_until. Two proofs that a holder is gone
# give them back at once instead: its heartbeat stopped (memory_core.heartbeat: any host), or
# its owner id ("host:pid:nonce", retrospect.claims.worker_id) names this host and a process
# that no longer exists (no need to wait for the heartbeat to go stale).


def owner_gone(owner: str, *, host: str | None = None) -> bool:
    """True when the claim's owner ran on this host and its process no longer exists."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False  # not a worker id we can check: wait for its lease to end
    here = (host if host is not None else socket.gethostname())[:24]
    pid = int(parts[1])
    if parts[0] != here or pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # a process of another user holds that pid: alive
        return False
    return False


def release_dead_claims(
    *, engine: Engine, namespace: str | None = None, stale_after: timedelta = STALE_AFTER
) -> int:
    """Give back the live-looking claims whose worker is gone (its process, on this host) or
    silent (no heartbeat for stale_after, any host); how many runs."""
    from sqlalchemy import or_, select, update
    from sqlmodel import col

    from memory_core.db import session_scope
    from memory_core.heartbeat import stale
    from memory_core.models.columns import utcnow
    from memory_core.models.trajectory import Trajectory, TrajectoryStatus

    t, processing, now = Trajectory, TrajectoryStatus.processing.value, utcnow()
    held = (col(t.status) == processing) & (col(t.lease_until) >= now)
    if namespace is not None:
        held = held & (col(t.namespace) == namespace)
    with session_scope(engine) as session:
        owners = session.execute(select(col(t.lease_owner)).where(held).distinct()).scalars()
        gone = [o for o in owners if o and owner_gone(o)]
        result = session.execute(
            update(t)
            .where(held, or_(col(t.lease_owner).in_(gone), stale(now, stale_after)))
            .values(
                status=TrajectoryStatus.pending.value,
                lease_owner=None,
                lease_until=None,
                lease_heartbeat=None,
            )
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class HeldClaims:
    """Runs a live worker holds: whose, how many, until when (UTC), and its last heartbeat."""

    owner: str
    runs: int
    until: datetime
    beat: datetime | None = None


def held_claims(
    *, engine: Engine, namespace: str | None = None, stale_after: timedelta = STALE_AFTER
) -> list[HeldClaims]:
    """The claims other workers hold now, by worker (after giving back the dead ones')."""
    from sqlalchemy import func, select
    from sqlmodel import Session, col

    from memory_core.models.columns import utcnow
    from memory_core.models.trajectory import Trajectory, TrajectoryStatus

    release_dead_claims(engine=engine, namespace=namespace, stale_after=stale_after)
    t = Trajectory
    q = (
        select(
            col(t.lease_owner),
            func.count(),
            func.max(col(t.lease_until)),
            func.max(col(t.lease_heartbeat)),
        )
        .where(
            col(t.status) == TrajectoryStatus.processing.value,
            col(t.lease_until) >= utcnow(),
        )
        .group_by(col(t.lease_owner))
    )
    if namespace is not None:
        q = q.where(col(t.namespace) == namespace)
    with Session(engine) as session:
        rows = session.execute(q).all()
    return [HeldClaims(str(o), int(n), u, b) for o, n, u, b in rows]
