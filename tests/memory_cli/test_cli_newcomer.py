"""A newcomer's first commands: quick answers, no server started, text shown as stored, ids by
prefix, on SQLite and PostgreSQL. Real subprocesses where the test is about the process (what a
command imports); ids and text through the CLI in process (tests.helpers.cli)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from memory_core.db import session_scope
from memory_core.models.card import Card
from tests.helpers.cli import hindsight
from tests.helpers.data import REPO


def run(env, *args: str, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}  # no server configured
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run(
        [sys.executable, *flags, "-m", "memory_cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def imported(stderr: str) -> set[str]:
    """Top-level packages a `-X importtime` run imported."""
    out = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            out.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return out


@pytest.mark.parametrize(
    "args", [["validate"], ["consolidate", "--dry-run"], ["decay", "--dry-run"], ["retrospect"]]
)
def test_stage_commands_run_in_process_without_prefect(env_for, args) -> None:
    proc = run(env_for, *args, importtime=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mods = imported(proc.stderr)
    assert "memory_core" in mods and "prefect" not in mods  # no flow, no temporary server
    assert "openai" not in mods  # no LLM configured: its client is never imported
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr
    assert "0" in proc.stdout  # the summary table of an empty store


def test_nightly_refuses_a_missing_input_before_any_flow(env_for, tmp_path) -> None:
    missing = tmp_path / "no-such-runs.json"
    proc = run(env_for, "nightly", "--input", str(missing), importtime=True)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"no such file or folder: {missing}" in proc.stderr
    assert "prefect" not in imported(proc.stderr)  # refused before the flow started
    assert "Traceback" not in proc.stderr


def test_help_lists_the_workflow_without_importing_the_domain(env_for) -> None:
    proc = run(env_for, "--help", importtime=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mods = imported(proc.stderr)
    assert not mods & {"sqlalchemy", "sqlmodel", "openai", "pandas", "prefect", "alembic"}
    panels = ["Ingest", "Nightly and stages", "Cards and facts", "Review", "Serve", "Operations"]
    # the panel titles are numbered ("1. Ingest"): a command's help may say "served"
    at = [proc.stdout.index(f"{n}. {p}") for n, p in enumerate(panels, start=1)]
    assert at == sorted(at)
    version = run(env_for, "--version")
    assert version.returncode == 0 and version.stdout.startswith("hindsight ")


def _card(engine, card_id: uuid.UUID, scenario: str) -> None:
    with session_scope(engine) as session:
        session.add(
            Card(
                card_id=card_id,
                namespace="default",
                scenario=scenario,
                status="active",
                confidence=0.6,
                signature=card_id.hex,
                preconditions=['last_error == "x [y]"'],
            )
        )


def test_ids_by_unique_prefix_and_text_as_stored(env_for, engine) -> None:
    a = uuid.UUID("abcd1234-0000-4000-8000-000000000001")
    b = uuid.UUID("abcd5678-0000-4000-8000-000000000002")
    _card(engine, a, "could not find [bisquick manufacturer]. similar: [bold]x[/bold]")
    _card(engine, b, "another card")
    listing = hindsight(env_for, "cards", "list", check=False)
    assert listing.returncode == 0, listing.stderr
    assert "could not find [bisquick manufacturer]. similar: [bold]x[/bold]" in listing.stdout
    assert 'last_error == "x [y]"' in listing.stdout
    assert "2 in all" in listing.stdout
    page = hindsight(env_for, "cards", "list", "--limit", "1", check=False)
    assert "1 of 2 shown" in page.stdout and "--offset 1" in page.stdout
    shown = hindsight(env_for, "cards", "show", "abcd1234", check=False)
    assert shown.returncode == 0, shown.stderr
    assert str(a) in shown.stdout
    # case and dashes do not matter
    history = hindsight(env_for, "cards", "history", "ABCD-5678", check=False)
    assert history.returncode == 0 and str(b) in history.stdout
    ambiguous = hindsight(env_for, "cards", "show", "abcd", check=False)
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
    missing = hindsight(env_for, "cards", "show", "ffff0000", check=False)
    assert missing.returncode == 1 and "no card id starts with" in missing.stderr
    too_short = hindsight(env_for, "cards", "show", "ab", check=False)
    assert too_short.returncode == 2 and "4 hex characters" in too_short.stderr
