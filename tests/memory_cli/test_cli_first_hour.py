"""A newcomer's first hour: stage bars that move, listings that say how many there
are, dead letters by id prefix, a quiet nightly. Real subprocesses on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from memory_core.db import session_scope
from memory_core.models.card import Card
from memory_core.models.trajectory import Trajectory, TrajectoryStatus
from tests.helpers import fake_model
from tests.helpers.data import REPO
from tests.helpers.scripted_llm import ScriptedLLM
from tests.memory_cli.test_cli_newcomer import run

_ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def frames(stderr: str) -> list[str]:
    """The lines a terminal would have shown of the progress bar, in order."""
    lines = _ANSI.sub("", stderr).replace("\r", "\n").splitlines()
    return [line.strip() for line in lines if line.strip()]


def ok(env, *args: str):
    proc = run(env, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_stage_bars_move_step_by_step(env_for) -> None:
    ok(env_for, "ingest", str(REPO / "examples"))
    ok(env_for, "retrospect")
    term = {**env_for, "FORCE_COLOR": "1"}  # stderr drawn as a terminal would see it
    shown = frames(ok(term, "validate").stderr)
    steps = [f for f in shown if f.startswith("validate: ")]
    # every step drawn, in order, each further along than the last, before the end
    assert any("loading the expectations" in f and " 1/5 " in f for f in steps), shown
    assert any("checking 15 drafts" in f and " 2/5 " in f for f in steps), shown
    assert any("writing the decisions" in f and " 4/5 " in f for f in steps), shown
    assert "15 drafts decided" in steps[-1] and " 5/5 " in steps[-1]
    done = [int(re.search(r" (\d+)/5 ", f).group(1)) for f in steps]  # type: ignore[union-attr]
    assert done == sorted(done) and done[0] == 0

    shown = frames(ok(term, "consolidate").stderr)
    steps = [f for f in shown if f.startswith("consolidate: ")]
    assert any("'default' (1 of 1 namespaces): planning merges over" in f for f in steps), shown
    assert any("applying" in f and " 2/3 " in f for f in steps), shown
    assert "changes applied" in steps[-1] and " 3/3 " in steps[-1]

    shown = frames(ok(term, "decay").stderr)
    steps = [f for f in shown if f.startswith("decay: ")]
    assert [s.split(" ━")[0] for s in steps[:1]] == [
        "decay: planning: fading, unused, over the cap"
    ]
    assert any("applying 0 changes" in f and " 2/3 " in f for f in steps), shown
    assert "0 changes applied" in steps[-1] and " 3/3 " in steps[-1]

    dry = frames(ok(term, "decay", "--dry-run").stderr)
    assert "changes planned, none written" in dry[-1] and " 3/3 " in dry[-1]


def _card(engine, card_id: uuid.UUID, status: str) -> None:
    with session_scope(engine) as session:
        session.add(
            Card(
                card_id=card_id,
                namespace="default",
                scenario=f"a card in {status}",
                status=status,
                confidence=0.4,
                signature=card_id.hex,
                preconditions=[],
            )
        )


def _dead_letter(engine, tid: uuid.UUID, key: str) -> None:
    with session_scope(engine) as session:
        session.add(
            Trajectory(
                id=tid,
                namespace="default",
                key=key,
                content_hash=key,
                source_format="steps",
                task_type="t",
                status=TrajectoryStatus.dead_letter.value,
                attempts=3,
                error="LLMTransient: down",
            )
        )


def test_every_listing_says_how_many_there_are(env_for, engine, tmp_path) -> None:
    for _ in range(3):
        _card(engine, uuid.uuid4(), "review")
    assert "cards in review in 'default': 3 in all" in ok(env_for, "review", "list").stdout
    page = ok(env_for, "review", "list", "--limit", "2").stdout
    assert "2 of 3 shown (1-2)" in page and "--limit 3" in page
    assert len(json.loads(ok(env_for, "review", "list", "-f", "json").stdout)) == 3  # a list

    for i in range(2):
        _dead_letter(engine, uuid.uuid4(), f"dl-{i}")
    assert "dead letters: 2 in all" in ok(env_for, "dead-letters", "list").stdout
    page = ok(env_for, "dead-letters", "list", "--limit", "1").stdout
    assert "1 of 2 shown (1-1)" in page and "--limit 2" in page

    assert "archived cards in 'default': 0 in all" in ok(env_for, "archive", "list").stdout

    ok(env_for, "facts", "add", "user.editor", "vim", "--query", "which editor")
    ok(env_for, "facts", "add", "user.shell", "zsh", "--query", "which shell")
    hits = ok(env_for, "facts", "search", "editor", "--top-k", "1").stdout
    assert "1 best fact(s) for 'editor' of 2 active in 'default'" in hits

    talk = tmp_path / "talk.json"
    said = ["Bob went hiking at the weekend", "Alice stayed home", "Bob likes hiking boots"]
    talk.write_text(json.dumps([{"role": "user", "content": t} for t in said]))
    ok(env_for, "ingest", str(talk))
    hits = ok(env_for, "memory", "search", "hiking", "--top-k", "1").stdout
    assert "1 best message(s) for 'hiking' of 3 in namespace 'default'" in hits

    query = ok(env_for, "cards", "query", "--state", "{}").stdout
    assert "matching card(s) of 2 active" in query  # the two facts are active cards


def test_dead_letters_redrive_takes_a_unique_id_prefix(env_for, engine) -> None:
    a = uuid.UUID("abcd1234-0000-4000-8000-000000000001")
    b = uuid.UUID("abcd5678-0000-4000-8000-000000000002")
    _dead_letter(engine, a, "first")
    _dead_letter(engine, b, "second")
    ambiguous = run(env_for, "dead-letters", "redrive", "abcd")
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
    assert str(a) in ambiguous.stderr and str(b) in ambiguous.stderr  # the ids it matches
    assert "Traceback" not in ambiguous.stderr
    one = ok(env_for, "dead-letters", "redrive", "ABCD-1234")  # case and dashes do not matter
    assert "1 dead letter(s) back" in one.stdout
    left = json.loads(ok(env_for, "dead-letters", "list", "-f", "json").stdout)
    assert [d["id"] for d in left] == [str(b)]
    missing = run(env_for, "dead-letters", "redrive", "ffff0000")
    assert missing.returncode == 1 and "no trajectory id starts with" in missing.stderr
    assert "1 dead letter(s) back" in ok(env_for, "dead-letters", "redrive", "second").stdout
    assert json.loads(ok(env_for, "dead-letters", "list", "-f", "json").stdout) == []


def test_dead_letters_discard_needs_a_reason_and_keeps_it(env_for, engine) -> None:
    from memory_core.retrospect.discard import list_discarded

    _dead_letter(engine, uuid.uuid4(), "gone")
    _dead_letter(engine, uuid.uuid4(), "kept")
    no_reason = run(env_for, "dead-letters", "discard", "gone")
    assert no_reason.returncode == 2 and "reason" in no_reason.stderr
    nothing_named = run(env_for, "dead-letters", "discard", "--reason", "stale")
    assert nothing_named.returncode == 2 and "--all" in nothing_named.stderr
    why = "the provider retired this model"
    out = ok(env_for, "dead-letters", "discard", "gone", "--reason", why).stdout
    assert "1 dead letter(s) discarded" in out
    left = json.loads(ok(env_for, "dead-letters", "list", "-f", "json").stdout)
    assert [d["key"] for d in left] == ["kept"]
    gone = list_discarded(engine=engine, namespace="default")
    assert [(d.key, d.reason, d.errors) for d in gone] == [
        ("gone", why, ["retrospect: LLMTransient: down"])
    ]
    assert gone[0].by.startswith("cli:")
    out = ok(env_for, "dead-letters", "discard", "--all", "--reason", "cleared").stdout
    assert "1 dead letter(s) discarded" in out
    assert json.loads(ok(env_for, "dead-letters", "list", "-f", "json").stdout) == []


_CHATTER = (
    "Traceback",
    "Error flushing events",
    "Still processing items",
    "CancelledError",
    "great_expectations",  # its INFO line ("Created temporary directory ...") on every run
    "| INFO",
)


@pytest.mark.parametrize("command", ["nightly", "retrospect"])
def test_flow_runs_print_no_prefect_chatter_on_success(env_for, command) -> None:
    if command == "nightly":
        proc = ok(env_for, "nightly", "--input", str(REPO / "examples"))
    else:
        ok(env_for, "ingest", str(REPO / "examples"))
        with ScriptedLLM(fake_model.respond) as server:
            env = {
                **env_for,
                "HINDSIGHT_LLM__BASE_URL": server.url,
                "HINDSIGHT_LLM__MODEL": "m",
                "HINDSIGHT_LLM__MODE": "instead",
            }
            proc = ok(env, "retrospect", "-f", "json")
        assert json.loads(proc.stdout)["llm_calls"] > 0  # it did run as a flow with the LLM
    noise = [line for line in proc.stderr.splitlines() if any(c in line for c in _CHATTER)]
    assert noise == [], proc.stderr[-3000:]


def test_the_nightly_table_shows_live_cards_only(engine) -> None:
    from memory_cli.card_table import show_cards_table
    from memory_cli.output import console
    from tests.helpers.serve import add_card

    for status in ("active", "review", "superseded", "archived"):
        add_card(engine, namespace="default", scenario=f"a {status} lesson", status=status)
    with console.capture() as shown:
        show_cards_table(engine, "default", title="live", limit=20, statuses=["active", "review"])
    text = shown.get()
    assert "a active lesson" in text and "a review lesson" in text
    assert "superseded" not in text and "archived" not in text
    assert "live: 2 in all" in text


_SERVER_LOGS = """
import asyncio, logging
import prefect.main  # what the temporary server's process imports: Prefect's logging set up
recorder = logging.getLogger("prefect.server.services.task_run_recorder")
pool = logging.getLogger("sqlalchemy.pool.impl.AsyncAdaptedQueuePool")
for exc in (asyncio.CancelledError("by the shutdown"), RuntimeError("database gone")):
    try:
        raise exc
    except BaseException:
        recorder.error("Error flushing 6 events (6 to retry, 0 dropped)", exc_info=True)
        pool.error("Exception during reset or similar", exc_info=True)
"""


def _server_logs(env: dict[str, str]) -> str:
    import subprocess
    import sys

    shown = subprocess.run(
        [sys.executable, "-c", _SERVER_LOGS], env=env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    return shown.stderr


def test_a_flush_cancelled_by_the_temporary_servers_shutdown_is_not_shown(
    tmp_path, monkeypatch
) -> None:
    """The temporary server (a process of its own, its stderr the command's) logs errors with
    a CancelledError traceback when its shutdown cancels the task-run recorder's flush (seen
    after a successful `retrospect` on a busy host): the logging file Prefect loads in that
    process drops them; any other failure still shows, and so does a cancel elsewhere."""
    from memory_cli.prefect_logging import EPHEMERAL_SERVER, SETTINGS_PATH, use_quiet_recorder

    monkeypatch.delenv(SETTINGS_PATH, raising=False)
    path = use_quiet_recorder(tmp_path)
    assert path is not None and path.parent == tmp_path
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path),
        "PREFECT_SERVER_LOGGING_LEVEL": "ERROR",
        SETTINGS_PATH: str(path),
        EPHEMERAL_SERVER: "1",
    }
    server = _server_logs(env)
    assert server.count("Error flushing 6 events") == 1, server
    assert server.count("Exception during reset or similar") == 1, server
    assert server.count("RuntimeError: database gone") == 2, server
    assert "CancelledError" not in server
    # a command's own process (not the temporary server's) shows a cancel as it is
    command = _server_logs({k: v for k, v in env.items() if k != EPHEMERAL_SERVER})
    assert command.count("CancelledError: by the shutdown") == 2, command
    # and without the file, so does the server: what the test above would have caught
    plain = _server_logs({k: v for k, v in env.items() if k != SETTINGS_PATH})
    assert plain.count("CancelledError: by the shutdown") == 2, plain


def test_a_logging_file_of_ones_own_is_left_alone(tmp_path, monkeypatch) -> None:
    from memory_cli.prefect_logging import SETTINGS_PATH, use_quiet_recorder

    monkeypatch.setenv(SETTINGS_PATH, str(tmp_path / "mine.yml"))
    assert use_quiet_recorder(tmp_path) is None
    assert os.environ[SETTINGS_PATH] == str(tmp_path / "mine.yml")
    monkeypatch.delenv(SETTINGS_PATH)
    (tmp_path / "logging.yml").write_text("version: 1\n")  # Prefect's own place for one
    assert use_quiet_recorder(tmp_path) is None
    assert SETTINGS_PATH not in os.environ
