"""Which store a command opens: the same from any folder of a project, and said out loud."""

from __future__ import annotations

import json
from pathlib import Path

from memory_core.settings import Settings
from memory_core.settings_store import STORE_DIR, nearest_store
from tests.helpers.cli import hindsight


def _found_env(env_for: dict[str, str], home: Path) -> dict[str, str]:
    """The test's environment without a data directory: the store is found, not configured."""
    env = {k: v for k, v in env_for.items() if k != "HINDSIGHT_DATA_DIR"}
    env["XDG_DATA_HOME"] = str(home / "xdg")  # the user data directory, inside the test
    return env


def test_any_folder_of_a_project_opens_its_store(env_for, settings, tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "examples" / "deep").mkdir(parents=True)
    env = _found_env(env_for, tmp_path)
    monkeypatch.chdir(project)
    # as `make run` leaves it: a store made at the project's top (SQLite: its database file)
    hindsight({**env, "HINDSIGHT_DATA_DIR": str(project / STORE_DIR)}, "status")
    (project / STORE_DIR).mkdir(exist_ok=True)  # PostgreSQL: the folder of reports, logs
    hindsight(env, "keys", "create", "--namespace", "default", "--name", "robot")
    monkeypatch.chdir(project / "examples" / "deep")
    proc = hindsight(env, "--verbose", "keys", "list", "--format", "json")
    assert [k["name"] for k in json.loads(proc.stdout)] == ["robot"]  # stdout: JSON only
    line = proc.stderr.splitlines()[0]
    if settings.database_url:  # the database is the URL's; its password never shown
        assert line.startswith("store: postgresql+psycopg://") and "HINDSIGHT_DATABASE_URL" in line
    else:
        assert line == (
            f"store: {project / STORE_DIR} (the nearest .hindsight from this folder up)"
        )
        assert not (project / "examples" / STORE_DIR).exists()
    assert nearest_store(project / "examples" / "deep") == project / STORE_DIR
    monkeypatch.delenv("HINDSIGHT_DATA_DIR", raising=False)  # `make test` exports one
    assert Settings().data_dir == project / STORE_DIR  # found the same way by every entry


def test_outside_any_project_the_user_data_directory(tmp_path, monkeypatch, env_for) -> None:
    monkeypatch.chdir(tmp_path)
    assert nearest_store(tmp_path) is None, "a .hindsight folder above the test's own"
    env = {k: v for k, v in _found_env(env_for, tmp_path).items() if "DATABASE_URL" not in k}
    proc = hindsight(env, "status", "--format", "json")
    assert json.loads(proc.stdout)["cards"] == {}
    store = tmp_path / "xdg" / "hindsight"
    # a new store is said even when not on a terminal: nothing is created quietly
    assert proc.stderr.splitlines()[0] == (
        f"store: {store} (the user data directory: no .hindsight folder from here up) - new, empty"
    )
    assert (store / "hindsight.db").is_file()
    again = hindsight(env, "status", "--format", "json")
    assert again.stderr == ""  # not new, not a terminal, not --verbose: nothing said
    explicit = hindsight({**env, "HINDSIGHT_DATA_DIR": str(store)}, "-v", "status")
    assert explicit.stderr.splitlines()[0] == f"store: {store} (HINDSIGHT_DATA_DIR)"
