"""Heartbeats on claimed trajectories: a worker that holds runs says so every few seconds, so
a claim whose heartbeat stopped (its process killed or hung, on this host or another) is
given back by the next run at once instead of at the end of its lease.

The beat is a small thread of the worker's own: a stage that spends minutes inside one
transaction or one LLM call still beats. While the worker's own transaction holds the rows
the beat waits for it; so does any other worker's claim, so nobody takes rows still being
written.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col

from memory_core.db import session_scope
from memory_core.leases import STALE_AFTER
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Trajectory, TrajectoryStatus
from memory_core.settings_groups import RetrospectSettings

_log = logging.getLogger("hindsight.heartbeat")


@dataclass(frozen=True)
class Liveness:
    """How often a worker beats, and how long a silence proves that it stopped."""

    every: timedelta = timedelta(seconds=30)
    stale_after: timedelta = STALE_AFTER

    @classmethod
    def of(cls, retrospect: RetrospectSettings) -> Liveness:
        """From the retrospect settings (heartbeat_seconds, stale_after_seconds)."""
        return cls(
            every=timedelta(seconds=retrospect.heartbeat_seconds),
            stale_after=timedelta(seconds=retrospect.stale_after_seconds),
        )


def stale(now: datetime, stale_after: timedelta) -> ColumnElement[bool]:
    """A claim whose worker stopped beating (a claim from before heartbeats has none: its
    lease alone decides)."""
    return col(Trajectory.lease_heartbeat) < now - stale_after


def beat(*, engine: Engine, worker: str) -> int:
    """Refresh the heartbeat of every run this worker holds; how many."""
    t = Trajectory
    with session_scope(engine) as session:
        result = session.execute(
            update(t)
            .where(col(t.lease_owner) == worker, col(t.status) == TrajectoryStatus.processing.value)
            .values(lease_heartbeat=utcnow())
        )
        return int(result.rowcount)  # type: ignore[attr-defined]


class Heartbeat:
    """A thread beating for `worker` every `every` until the block ends."""

    def __init__(self, *, engine: Engine, worker: str, every: timedelta) -> None:
        self.engine, self.worker, self.every = engine, worker, every.total_seconds()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat {worker}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                beat(engine=self.engine, worker=self.worker)
            except SQLAlchemyError as exc:
                # a database that is away now: the next beat tries again; only a silence
                # longer than stale_after gives the runs away
                _log.warning("heartbeat of %s not written: %s", self.worker, exc)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
