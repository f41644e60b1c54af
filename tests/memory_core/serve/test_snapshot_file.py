"""A snapshot saved to a file and read on the next cold load serves what a fresh load serves:
the same cards, index and rankings, with the changes and uses made since; a file that cannot
be trusted means a full load, a warning, and a new file."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from sqlalchemy import text

from memory_core.models.columns import utcnow
from memory_core.serve.changes import prune
from memory_core.serve.retrieval import retrieve
from memory_core.serve.snapshot import Snapshot, load_snapshot
from memory_core.serve.snapshot_cache import SnapshotCache
from memory_core.serve.snapshot_file import FORMAT, MAGIC, read_header
from memory_core.serve.snapshot_restore import SnapshotFiles, snapshot_files
from memory_core.serve.uses import UseRecorder
from memory_core.settings import Settings
from tests.helpers.serve import add_card
from tests.memory_core.serve.test_serve_snapshot import _edit

NS = "team/a 'quoted'"  # user input: never part of a path as it is
STATES = [
    {"tool": "search"},
    {"tool": "fetch", "error_code": 429},
    {"tool": "search", "retry_count": 3},
    {"tool": "push", "retry_count": 7, "error": "a timeout here"},
    {"task_type": "deploy", "tool": "push", "attempt": 2},
    {"tool": "other"},
    {},
]
PRECONDITIONS = [
    ['tool == "search"'],
    ['tool in ["fetch", "get"]', "error_code == 429"],
    ['tool == "search" || tool == "fetch"'],
    ["retry_count > 2"],
    ["retry_count > 2", "retry_count < 9"],
    ['error.contains("timeout")'],
    ['task_type == "deploy"', "attempt >= 1"],
    ["size(tools_used) > 1"],
    [],
    ['tool == "push"', 'error.startsWith("a ")'],
]


def _files(settings: Settings, min_cards: int = 1) -> SnapshotFiles:
    return SnapshotFiles(settings.data_dir / "snapshots", min_cards)


def _seed(engine, n: int = 40) -> list:
    cards = []
    for i in range(n):
        cards.append(
            add_card(
                engine,
                namespace=NS,
                scenario=f"card {i}",
                preconditions=PRECONDITIONS[i % len(PRECONDITIONS)],
                tool=["search", "fetch", "push"][i % 3],
                confidence=0.3 + (i % 7) / 10,
                use_count=i % 4,
                kind="fact" if i % 9 == 0 else "experience",
                origin=["operator", "observed", None][i % 3],
            )
        )
    return cards


def _use(engine, cards, times: int = 1, ago: timedelta = timedelta(0)) -> None:
    """Uses written as the serving process writes them: no change feed entry, no version."""
    rec = UseRecorder(engine=engine)
    for _ in range(times):
        rec.record(namespace=NS, card_ids=[c.card_id for c in cards], now=utcnow() - ago)
    rec.flush()


def _saved(cache: SnapshotCache, path: Path, after: float = 0.0) -> None:
    """Wait for the background write of the file (newer than `after`)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_mtime > after and not cache._background:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written")


def _written(engine, settings: Settings) -> Path:
    """A full load whose file is written after it."""
    cache = SnapshotCache(engine=engine, refresh_s=0.0, files=_files(settings))
    assert not cache.get(NS).from_file
    path = _files(settings).path(NS)
    _saved(cache, path)
    return path


def _fields(s: Snapshot) -> list[tuple]:
    return [
        (
            e.card_id, e.kind, e.confidence, e.seen_at, e.use_count, e.evidence_count,
            [c.source for c in e.compiled], [sorted(c.variables) for c in e.compiled],
            e.scenario, e.rest, e.broken, e.trust, e.pinned, e.version, e.updated_at,
            e.filed, e.indexed, e.run_count,
        )
        for e in sorted(s.entries.values(), key=lambda e: e.card_id)
    ]  # fmt: skip


def _assert_same(a: Snapshot, b: Snapshot) -> None:
    """Every field retrieval reads, the index's candidates and statistics, and rankings."""
    assert _fields(a) == _fields(b)
    assert a.max_uses == b.max_uses and a.stats.atoms == b.stats.atoms
    now = utcnow()
    for state in STATES:
        assert sorted(e.card_id for e in a.candidates(state)) == sorted(
            e.card_id for e in b.candidates(state)
        )
        for query in (None, "card 3 search"):
            ra = retrieve(snapshot=a, state=state, now=now, top_k=50, query=query)
            rb = retrieve(snapshot=b, state=state, now=now, top_k=50, query=query)
            assert [(m.entry.card_id, m.score) for m in ra.matches] == [
                (m.entry.card_id, m.score) for m in rb.matches
            ]
        assert len(a.index.sample(state, limit=256)) == len(b.index.sample(state, limit=256))


def test_a_snapshot_from_the_file_equals_a_fresh_load(engine, settings) -> None:
    _seed(engine)
    path = _written(engine, settings)
    assert path.parent == settings.data_dir / "snapshots" and NS not in path.name
    cold = SnapshotCache(engine=engine, files=_files(settings)).get(NS)
    assert cold.from_file and len(cold.entries) == 40
    _assert_same(cold, load_snapshot(engine=engine, namespace=NS))


def test_changes_and_uses_after_the_file_are_served_after_a_cold_load(engine, settings) -> None:
    cards = _seed(engine)
    path = _written(engine, settings)
    written = path.stat().st_mtime
    _edit(engine, cards[0].card_id, preconditions=['tool == "other"'], scenario="changed")
    _edit(engine, cards[1].card_id, status="archived")
    added = add_card(engine, namespace=NS, scenario="added", preconditions=['tool == "other"'])
    _use(engine, cards[5:9], times=3)  # uses write no feed entry
    # a use queued long before (the database was down) lands after the file: all uses read
    _use(engine, cards[12:13], ago=timedelta(days=1))
    cache = SnapshotCache(engine=engine, files=_files(settings))
    cold = cache.get(NS)
    assert cold.from_file
    fresh = load_snapshot(engine=engine, namespace=NS)
    _assert_same(cold, fresh)
    assert cards[1].card_id not in cold.entries and added.card_id in cold.entries
    assert cold.entries[cards[6].card_id].use_count == cards[6].use_count + 3
    assert cold.entries[cards[12].card_id].use_count == cards[12].use_count + 1
    assert {e.scenario for e in cold.candidates({"tool": "other"})} >= {"changed", "added"}
    assert cold.watermark == fresh.watermark
    # 11 of 41 cards brought current (over 5%): the file is written again, as a full load's
    _saved(cache, path, after=written)
    again = SnapshotCache(engine=engine, files=_files(settings)).get(NS)
    assert again.from_file and read_header(path)["watermark"] == cold.watermark
    _assert_same(again, fresh)


def test_a_file_a_few_changes_behind_is_not_written_again(engine, settings) -> None:
    cards = _seed(engine)
    path = _written(engine, settings)
    written = read_header(path)
    _edit(engine, cards[0].card_id, scenario="changed")  # 1 of 40: under 5%
    cache = SnapshotCache(engine=engine, files=_files(settings))
    assert cache.get(NS).from_file
    time.sleep(0.3)
    assert not cache._background and read_header(path) == written


REASONS = {
    "truncated": "truncated",
    "garbage": "not a snapshot file",
    "other_db": "another database",
    "format": "format 999",
    "format_1": f"format 1, this version reads {FORMAT}",  # the one JSON body before sections
    "pruned": "pruned past the file's watermark",
}


@pytest.mark.parametrize("damage", list(REASONS))
def test_a_file_that_cannot_be_trusted_means_a_full_load_a_warning_and_a_new_file(
    engine, settings, damage, caplog
) -> None:
    cards = _seed(engine, 12)
    path = _written(engine, settings)
    data = path.read_bytes()
    head_end = data.index(b"\n", len(MAGIC))
    header = orjson.loads(data[len(MAGIC) : head_end])
    if damage == "truncated":
        path.write_bytes(data[: len(data) * 2 // 3])
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif damage in ("other_db", "format", "format_1"):  # the body and its CRC intact
        header.update(
            {"db": "0" * 64}
            if damage == "other_db"
            else {"format": 999 if damage == "format" else 1}
        )
        path.write_bytes(MAGIC + orjson.dumps(header) + data[head_end:])
    else:  # the changes after the file's watermark are gone from the feed
        for c in cards:
            _edit(engine, c.card_id, confidence=0.9)
        for c in cards:
            _edit(engine, c.card_id, confidence=0.8)
        assert prune(engine, keep=1) > 0
    written = path.stat().st_mtime
    time.sleep(0.01)
    cache = SnapshotCache(engine=engine, files=_files(settings))
    with caplog.at_level(logging.WARNING):
        cold = cache.get(NS)
    assert not cold.from_file
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in m and REASONS[damage] in m for m in warned), warned
    _assert_same(cold, load_snapshot(engine=engine, namespace=NS))
    _saved(cache, path, after=written)  # written anew after the full load
    assert read_header(path)["watermark"] == cold.watermark
    assert SnapshotCache(engine=engine, files=_files(settings)).get(NS).from_file


def test_a_change_the_feed_missed_means_a_full_load(engine, settings, caplog) -> None:
    """The fingerprint check after the feed: a writer whose change wrote no feed entry."""
    cards = _seed(engine, 6)
    _written(engine, settings)
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER card_change_update"))
        else:
            conn.execute(text("ALTER TABLE card DISABLE TRIGGER card_change_update"))
    try:
        _edit(engine, cards[2].card_id, status="archived")
    finally:
        if engine.dialect.name != "sqlite":
            with engine.begin() as conn:
                conn.execute(text("ALTER TABLE card ENABLE TRIGGER card_change_update"))
    with caplog.at_level(logging.WARNING):
        cold = SnapshotCache(engine=engine, files=_files(settings)).get(NS)
    assert not cold.from_file and cards[2].card_id not in cold.entries
    assert "differ from the database" in caplog.text


_KILLED_WRITER = """
import os, sys, time
from pathlib import Path
from memory_core.serve import snapshot_file
os.fsync = lambda fd: (print("writing", flush=True), time.sleep(60))
snapshot_file.write(Path(sys.argv[1]), {"db": "x"}, [b"[" + b"1," * 5_000_000 + b"1]"])
"""


def test_a_write_killed_midway_never_yields_a_half_file(engine, settings) -> None:
    _seed(engine, 8)
    path = _written(engine, settings)
    good = path.read_bytes()
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED_WRITER), str(path)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert child.stdout is not None and child.stdout.readline() == b"writing\n"
    child.kill()  # SIGKILL between the write and the rename
    child.wait()
    leftovers = list(path.parent.glob(path.name + ".*.tmp"))
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > len(good)
    assert path.read_bytes() == good
    cold = SnapshotCache(engine=engine, files=_files(settings)).get(NS)
    assert cold.from_file  # the whole old file, never the half new one
    _assert_same(cold, load_snapshot(engine=engine, namespace=NS))
    # the next write removes a temp file old enough to be a killed write's
    old = time.time() - 7200
    os.utime(leftovers[0], (old, old))
    path.unlink()
    _written(engine, settings)
    assert not leftovers[0].exists()


def test_small_namespaces_write_no_file_and_zero_turns_files_off(
    engine, settings, monkeypatch
) -> None:
    _seed(engine, 5)
    cache = SnapshotCache(engine=engine, files=_files(settings, min_cards=6))
    cache.get(NS)
    cache.get("empty")
    time.sleep(0.2)
    assert not cache._background and not (settings.data_dir / "snapshots").exists()
    assert snapshot_files(Settings(data_dir=settings.data_dir)) == _files(settings, 20_000)
    monkeypatch.setenv("HINDSIGHT_SERVE__SNAPSHOT_FILE_MIN_CARDS", "0")
    assert snapshot_files(Settings(data_dir=settings.data_dir)) is None
    add_card(engine, namespace=NS, scenario="sixth")
    reloaded = SnapshotCache(engine=engine, files=_files(settings, min_cards=6))
    reloaded.get(NS)
    _saved(reloaded, _files(settings).path(NS))  # at the threshold: written


def test_the_servers_save_and_read_snapshot_files(engine, settings) -> None:
    """`hindsight serve` and `hindsight mcp` build their service with the settings' files."""
    from memory_cli.serve import _service

    service = _service(engine, settings)
    assert service.snapshots.files == snapshot_files(settings) == _files(settings, 20_000)


def test_a_file_written_for_another_database_is_not_used(
    engine, settings, sqlite_template, tmp_path, caplog
) -> None:
    """Not a forged header: the file of one database put beside another one's data."""
    import shutil

    from memory_core import db

    _seed(engine, 5)
    path = _written(engine, settings)
    other = Settings(data_dir=tmp_path / "other")
    shutil.copytree(sqlite_template, other.data_dir)
    other_engine = db.make_engine(other)
    try:
        add_card(other_engine, namespace=NS, scenario="the other database's")
        copied = _files(other).path(NS)
        copied.parent.mkdir(parents=True)
        shutil.copy(path, copied)
        with caplog.at_level(logging.WARNING):
            cold = SnapshotCache(engine=other_engine, files=_files(other)).get(NS)
        assert not cold.from_file
        assert {e.scenario for e in cold.entries.values()} == {"the other database's"}
        assert "another database" in caplog.text and str(copied) in caplog.text
    finally:
        other_engine.dispose()


def test_a_card_the_file_cannot_hold_means_no_file_and_a_warning(engine, settings, caplog) -> None:
    """A literal past 64 bits (orjson's integers; written by a tool, as CEL refuses it): the
    namespace is served, never saved."""
    from memory_core.db import session_scope
    from memory_core.models.card import Card

    _seed(engine, 3)
    with session_scope(engine) as session:
        pre = ["n == 123456789012345678901"]
        session.add(
            Card(namespace=NS, scenario="huge", preconditions=pre, signature="x", status="active")
        )
    cache = SnapshotCache(engine=engine, files=_files(settings))
    with caplog.at_level(logging.WARNING):
        snap = cache.get(NS)
        deadline = time.monotonic() + 10
        while cache._background and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(snap.entries) == 4 and not _files(settings).path(NS).exists()
    assert "not written" in caplog.text
