"""A tool's reminders served in the order of the kinds of call their errors came with: a call
that lacks a reminder's profile gets the others first, in any process and after a file load or
an export and import (both databases)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from memory_core.models.columns import utcnow
from memory_core.namespaces.export import export_lines
from memory_core.namespaces.importer import import_namespace
from memory_core.serve.keys import Principal
from memory_core.serve.retrieval import retrieve
from memory_core.serve.schemas import CheckActionRequest, QueryRequest
from memory_core.serve.service import MemoryService
from memory_core.serve.snapshot import Snapshot, load_snapshot
from memory_core.serve.snapshot_cache import SnapshotCache
from memory_core.serve.snapshot_restore import SnapshotFiles
from memory_core.settings import Settings
from tests.memory_core.retrospect.test_reminder_profile import LATE, PAY, SEAT, night

REPO = Path(__file__).resolve().parents[3]
WHO = Principal(key_id=uuid.UUID(int=0), namespace="default", scopes=frozenset({"read"}))


def _call(cabin: str | None) -> dict:
    """A call of the tool: with no arguments in the state, or booking the cabin."""
    if cabin is None:
        return {"tool": "book"}
    return {"tool": "book", "args": {"cabin": cabin, "user": "user_5"}}


def _order(snap: Snapshot, state: dict, names: dict) -> list[str]:
    found = retrieve(snapshot=snap, state=state, now=utcnow(), top_k=5).matches
    return [names[m.entry.card_id] for m in found]


def _names(cards: dict) -> dict:
    return {c.card_id: e.split(": ")[1][:12] for e, c in cards.items()}


def test_a_call_gets_the_reminders_of_its_kind_first(engine) -> None:
    cards = night(engine)
    names = _names(cards)
    seat, pay, late = (names[cards[e].card_id] for e in (SEAT, PAY, LATE))
    snap = load_snapshot(engine=engine, namespace="default")
    assert set(snap.profiles) == {cards[SEAT].card_id, cards[PAY].card_id}
    # three runs behind the seat reminder: first wherever the call does not say otherwise
    assert _order(snap, _call(None), names) == [seat, pay, late]
    assert _order(snap, _call("business"), names)[:1] == [seat]
    assert _order(snap, _call("economy"), names) == [pay, late, seat]
    explained = retrieve(snapshot=snap, state=_call("economy"), now=utcnow(), explain=True)
    assert explained.demoted == {
        cards[SEAT].card_id: 'its errors came with calls where args.cabin == "business", '
        "and this call is not one"
    }
    assert retrieve(snapshot=snap, state=_call(None), now=utcnow(), explain=True).demoted == {}


def test_another_process_narrows_a_profile_and_the_served_order_follows(engine, env_for) -> None:
    cards = night(engine)
    names = _names(cards)
    cache = SnapshotCache(engine=engine, refresh_s=0.0)
    snap = cache.get("default")
    assert _order(snap, _call("economy"), names)[-1] == names[cards[SEAT].card_id]
    # the next night, in its own process: a seat error of an economy booking, a third group
    script = (
        "from memory_core.db import make_engine; from memory_core.settings import Settings; "
        "from tests.memory_core.retrospect.test_reminder_profile import SEAT, _run, night; "
        "night(make_engine(Settings()), "
        "[_run('c-seat', 'c', [({'cabin': 'economy', 'user': 'user_9'}, SEAT)])])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**env_for, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert cache.get("default") is snap and cache.reloads == 0  # caught up from the feed
    assert [c.source for c in snap.profiles[cards[SEAT].card_id]] == [
        'args.user.matches("^user_[0-9]+$")'
    ]
    assert _order(snap, _call("economy"), names)[0] == names[cards[SEAT].card_id]


def test_profiles_survive_the_snapshot_file_and_an_export(engine, settings) -> None:
    cards = night(engine)
    names = _names(cards)
    files = SnapshotFiles(settings.data_dir / "snapshots", 1)
    SnapshotCache(engine=engine, refresh_s=0.0, files=files).get("default")
    path = files.path("default")
    for _ in range(200):  # written in the background
        if path.exists():
            break
        __import__("time").sleep(0.05)
    cold = SnapshotCache(engine=engine, files=files).get("default")
    fresh = load_snapshot(engine=engine, namespace="default")
    assert cold.from_file
    sources = {k: [c.source for c in v] for k, v in fresh.profiles.items()}
    assert {k: [c.source for c in v] for k, v in cold.profiles.items()} == sources
    assert _order(cold, _call("economy"), names) == _order(fresh, _call("economy"), names)

    lines = list(export_lines(engine=engine, namespace="default", with_trajectories=True))
    import_namespace(engine=engine, lines=lines, namespace="copy")
    copy = load_snapshot(engine=engine, namespace="copy")
    by_scenario = {e.scenario: e.card_id for e in copy.entries.values()}
    mine = {fresh.entries[k].scenario: v for k, v in sources.items()}
    assert {s: [c.source for c in copy.profiles[by_scenario[s]]] for s in mine} == mine


def test_the_api_says_why_a_reminder_comes_later(engine) -> None:
    cards = night(engine)
    service = MemoryService(engine=engine, settings=Settings())
    try:
        check = service.check_action(
            principal=WHO,
            request=CheckActionRequest(tool="book", args={"cabin": "economy", "user": "user_5"}),
        )
        result = service.query(
            principal=WHO,
            request=QueryRequest(task_state=_call("economy"), explain=True),
        )
    finally:
        service.close()
    last = check.warnings[-1]
    assert last["card_id"] == str(cards[SEAT].card_id) and last["scope"] == "tool"
    assert 'args.cabin == "business"' in last["demoted"]
    assert all("demoted" not in w for w in check.warnings[:-1])
    assert result.explain is not None
    assert [(d.card_id, d.reason) for d in result.explain.demoted] == [
        (cards[SEAT].card_id, last["demoted"])
    ]
    assert result.cards[-1].card.card_id == cards[SEAT].card_id
