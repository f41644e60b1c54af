"""A newcomer's first hour: stage bars that move, listings that say how many there
are, dead letters by id prefix, a quiet nightly. Real subprocesses on SQLite and PostgreSQL."""

from __future__ import annotations

import json
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


def test_a_flush_cancelled_by_the_temporary_servers_shutdown_is_not_shown(tmp_path) -> None:
    """Prefect's task-run recorder logs an error with a traceback when the server's shutdown
    cancels its flush (a CI run showed it after a successful `retrospect`): dropped; any other
    failure to record still shows."""
    import asyncio
    import logging
    import sys

    from prefect.server.services import task_run_recorder

    from memory_cli.context import quiet_recorder_shutdown

    quiet_recorder_shutdown()  # what prefect_defaults does (it also sets up inline runs)
    logger = task_run_recorder.logger
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    logger.addHandler(handler)
    try:
        for exc in (asyncio.CancelledError(), RuntimeError("database gone")):
            try:
                raise exc
            except BaseException:
                logger.error("Error flushing 6 events (6 to retry, 0 dropped)", exc_info=True)
        assert sys.exc_info()[0] is None
    finally:
        logger.removeHandler(handler)
    assert seen == ["Error flushing 6 events (6 to retry, 0 dropped)"]  # the RuntimeError's
