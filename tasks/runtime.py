"""Per-process resources the tasks share (built lazily, never at import time)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from sqlalchemy.engine import Engine

from memory_core import db
from memory_core.errors import ConcurrentUpdate
from memory_core.settings import Settings

if TYPE_CHECKING:  # the CLI's in-process stages use this module without importing Prefect
    from prefect.client.schemas.objects import State

V = TypeVar("V")


class PerSettings(Generic[V]):
    """One value per process and settings, built from the settings object itself.

    Keyed on Settings.cache_key (secrets as digests): never rebuilt from a dump, whose secrets
    read '**********'.
    """

    def __init__(
        self,
        build: Callable[[Settings], V],
        maxsize: int = 4,
        release: Callable[[V], None] | None = None,
    ) -> None:
        self._build = build
        self._release = release
        self._maxsize = maxsize
        self._values: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, settings: Settings) -> V:
        key = settings.cache_key()
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            value = self._build(settings)
            self._values[key] = value
            while len(self._values) > self._maxsize:
                self._drop(self._values.popitem(last=False)[1])
            return value

    def clear(self) -> None:
        """Forget and release every value (a test's end, a process that changes settings)."""
        with self._lock:
            values = list(self._values.values())
            self._values.clear()
        for value in values:
            self._drop(value)

    def _drop(self, value: V) -> None:
        # an evicted engine's idle connections would stay open until the garbage collector
        # found it: on a PostgreSQL server shared by workers they count against its limit
        if self._release is not None:
            self._release(value)


def _migrated_engine(settings: Settings) -> Engine:
    db.upgrade(settings)
    return db.make_engine(settings)


# dispose() closes the idle connections; one checked out by a running task closes on return
_engine = PerSettings(_migrated_engine, maxsize=8, release=Engine.dispose)


def release_engines() -> None:
    """Close every engine this process cached (and their idle database connections)."""
    _engine.clear()


# Alembic's upgrade swaps module globals (alembic.context): two threads migrating at once fail
# with KeyError 'script'. Seen on a fresh Dask worker whose first two tasks start together.
_FIRST_USE = threading.Lock()


def engine_for(settings: Settings) -> Engine:
    """The engine for these settings, migrated to the latest schema once per process."""
    with _FIRST_USE:
        return _engine(settings)


def concurrent_update(_task: object, _run: object, state: State) -> bool:
    """Retry only when cards changed under the run: the retry plans afresh from fresh rows."""
    return isinstance(state.result(raise_on_failure=False), ConcurrentUpdate)
