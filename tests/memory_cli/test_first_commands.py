"""A new user's first commands: argument errors before anything is drawn or created, output
that scripts can read whole, and the version without loading the commands."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.helpers.cli import hindsight
from tests.helpers.data import REPO


def test_a_wrong_path_is_one_line_before_any_bar_or_store(env_for, tmp_path) -> None:
    new = {**env_for, "HINDSIGHT_DATA_DIR": str(tmp_path / "new"), "FORCE_COLOR": "1"}
    missing = tmp_path / "no-such-runs.json"
    proc = hindsight(new, "ingest", str(missing), check=False, process=True)
    assert proc.returncode == 2
    plain = re.sub(r"\x1b\[[0-9;]*m", "", proc.stderr)
    assert plain.strip() == f"error: field 'path': no such file or folder: {missing}"  # no bar
    assert not (tmp_path / "new").exists()


def test_keys_and_ids_are_never_wrapped_off_a_terminal(env_for) -> None:
    namespace = "a-team-whose-namespace-name-is-long-enough-to-wrap-an-eighty-column-line"
    made = hindsight(
        env_for, "keys", "create", "--namespace", namespace, "--scopes", "read,write,admin"
    )
    key = made.stdout.strip()
    assert "\n" not in key and key.startswith("hs_")
    (said,) = made.stderr.strip().splitlines()
    assert namespace in said and len(said) > 80  # one line, as long as it is
    listing = hindsight(env_for, "keys", "list")
    (row,) = [line for line in listing.stdout.splitlines() if namespace in line]
    key_id = json.loads(hindsight(env_for, "keys", "list", "--format", "json").stdout)[0]["id"]
    assert key_id in row  # the whole id on the row that names its namespace


def test_version_without_loading_the_commands() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memory_cli", "--version"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("hindsight ")
    loaded = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert not {"typer", "rich", "memory_cli.main", "memory_core"} & loaded
