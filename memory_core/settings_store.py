"""Which store a command opens: the same one from any folder of a project.

An explicit HINDSIGHT_DATA_DIR (or a database URL, for the database) wins; otherwise the
nearest `.hindsight` folder from the working directory up, else the user's data directory.
A relative data directory was read from the working directory: `cd examples` then opened a
new, empty store without a word."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_core.settings import Settings

STORE_DIR = ".hindsight"  # what `make run` and a project's first command create


def nearest_store(start: Path | None = None) -> Path | None:
    """The nearest `.hindsight` folder from start (the working directory) up, or None."""
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        candidate = folder / STORE_DIR
        if candidate.is_dir():
            return candidate
    return None


def user_store() -> Path:
    """The store outside any project: the platform's user data directory."""
    from platformdirs import user_data_path

    return user_data_path("hindsight", appauthor=False)


def default_data_dir() -> Path:
    """The data directory when none is configured: the nearest `.hindsight` up the tree, else
    the user's data directory."""
    return nearest_store() or user_store()


def describe_store(settings: Settings) -> str:
    """One line naming the store the settings open and why that one (no password shown)."""
    if settings.database_url:
        from sqlalchemy.engine import make_url

        url = make_url(settings.sqlalchemy_url).render_as_string(hide_password=True)
        return f"store: {url} (HINDSIGHT_DATABASE_URL)"
    where = settings.data_dir.absolute()
    if "data_dir" in settings.model_fields_set:
        why = "HINDSIGHT_DATA_DIR" if os.environ.get("HINDSIGHT_DATA_DIR") else "configured"
    elif where.name == STORE_DIR and where.parent in (here := Path.cwd().absolute(), *here.parents):
        why = "the nearest .hindsight from this folder up"
    else:
        why = f"the user data directory: no {STORE_DIR} folder from here up"
    return f"store: {where} ({why})"


def is_new(settings: Settings) -> bool:
    """A SQLite store not created yet (the command about to run creates it empty)."""
    return not settings.database_url and not (settings.data_dir / "hindsight.db").exists()
