"""Per-process resources the tasks share (built lazily, never at import time)."""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from memory_core import db
from memory_core.errors import ConcurrentUpdate
from memory_core.settings import Settings

if TYPE_CHECKING:  # the CLI's in-process stages use this module without importing Prefect
    from prefect.client.schemas.objects import State


@lru_cache(maxsize=8)
def _engine(url: str, settings_json: str) -> Engine:
    settings = Settings.model_validate_json(settings_json)
    db.upgrade(settings)
    return db.make_engine(settings)


# Alembic's upgrade swaps module globals (alembic.context): two threads migrating at once fail
# with KeyError 'script'. Seen on a fresh Dask worker whose first two tasks start together.
_FIRST_USE = threading.Lock()


def engine_for(settings: Settings) -> Engine:
    """The engine for these settings, migrated to the latest schema once per process."""
    with _FIRST_USE:
        return _engine(settings.sqlalchemy_url, settings.model_dump_json())


def concurrent_update(_task: object, _run: object, state: State) -> bool:
    """Retry only when cards changed under the run: the retry plans afresh from fresh rows."""
    return isinstance(state.result(raise_on_failure=False), ConcurrentUpdate)
