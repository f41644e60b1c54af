"""What a loaded snapshot holds per card stays small (a million cards under 1 GB):
the C heap's free pages handed back after a load, values the cards share held once."""

from __future__ import annotations

import random
import sys
import uuid
from dataclasses import replace

from sqlalchemy import select

import memory_core.serve.snapshot_build as snapshot_build
from memory_core.db import read_session
from memory_core.models.columns import utcnow
from memory_core.preconditions import compile_all
from memory_core.serve.card_rows import LoadMemo, entry_of, row_columns
from memory_core.serve.entry import Entry
from memory_core.serve.index import Stats, build, card_needs, choose, chosen_needs
from memory_core.serve.snapshot import load_snapshot
from memory_core.serve.snapshot_cache import SnapshotCache
from memory_core.serve.snapshot_restore import SnapshotFiles, save
from tests.helpers.serve import add_card
from tests.memory_core.serve.test_serve_index import SHAPES

NS = "memory"


def test_a_load_hands_the_c_heaps_free_pages_back(engine, monkeypatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(snapshot_build, "_TRIM", lambda pad: calls.append(pad) or 1)
    add_card(engine, namespace=NS, scenario="a card", preconditions=['tool == "search"'])
    assert len(SnapshotCache(engine=engine).get(NS).entries) == 1
    assert calls == [0]


def test_without_malloc_trim_a_load_still_works(engine, monkeypatch) -> None:
    monkeypatch.setattr(snapshot_build, "_TRIM", None)
    add_card(engine, namespace=NS, scenario="a card", preconditions=['tool == "search"'])
    assert not snapshot_build.trim_heap()
    assert len(SnapshotCache(engine=engine).get(NS).entries) == 1


def _distinct(values) -> int:
    return len({id(v) for v in values})


def test_equal_confidences_are_one_object_in_a_load_from_the_database(engine) -> None:
    for i in range(6):
        add_card(engine, namespace=NS, scenario=f"card {i}", confidence=[0.7, 0.25][i % 2])
    snap = load_snapshot(engine=engine, namespace=NS)
    assert sorted(e.confidence for e in snap.entries.values()) == [0.25] * 3 + [0.7] * 3
    assert _distinct(e.confidence for e in snap.entries.values()) == 2


def test_a_restored_file_holds_equal_atoms_weights_and_confidences_once(engine, settings) -> None:
    for i in range(12):  # two lists per tool: each need of `tool in [...]` repeats its atoms
        add_card(
            engine,
            namespace=NS,
            scenario=f"card {i}",
            preconditions=[f'tool in ["t{i % 3}", "u{i % 2}"]', f"retry_count > {i}"],
            confidence=[0.7, 0.25][i % 2],
            origin=["operator", "observed"][i % 2],
        )
    files = SnapshotFiles(settings.data_dir / "snapshots", 1)
    save(engine, files, load_snapshot(engine=engine, namespace=NS))
    snap = SnapshotCache(engine=engine, files=files).get(NS)
    assert snap.from_file and len(snap.entries) == 12
    atoms = [a for e in snap.entries.values() if e.filed and e.filed[0] == "eq" for a in e.filed[1]]
    assert len(atoms) == 24 and _distinct(atoms) == len(set(atoms)) == 5
    assert _distinct(e.confidence for e in snap.entries.values()) == 2
    assert _distinct(e.trust for e in snap.entries.values()) == len(
        {e.trust for e in snap.entries.values()}
    )


def test_an_entry_holds_its_flags_and_version_in_one_slot() -> None:
    now = utcnow()
    e = Entry(uuid.uuid4(), "experience", 0.5, now, 0, 1, (), "s", "r", False, 1.0, True, 7)
    assert sys.getsizeof(e) <= 192  # 208 with a slot for each
    assert (e.pinned, e.indexed, e.version) == (True, False, 7)
    e.indexed, e.version = True, 300
    e.pinned = False
    assert (e.pinned, e.indexed, e.version) == (False, True, 300)
    copy = replace(e, confidence=0.9)
    assert (copy.pinned, copy.indexed, copy.version, copy.confidence) == (False, True, 300, 0.9)


def test_a_load_keys_its_precondition_lists_by_the_tuples_the_cards_keep(engine) -> None:
    for i in range(6):
        add_card(
            engine, namespace=NS, scenario=f"card {i}", preconditions=[f"retry_count > {i % 2}"]
        )
    memo = LoadMemo()
    with read_session(engine) as session:
        rows = session.execute(select(*row_columns())).all()
    entries = [entry_of(r, memo) for r in rows]
    assert _distinct(e.compiled for e in entries) == len(memo.lists) == 2
    assert all(k is v for k, v in memo.lists.items())  # no stored text kept for the load


def test_a_loads_chosen_needs_are_what_each_card_alone_would_choose() -> None:
    rnd = random.Random(3)
    lists = [tuple(compile_all(SHAPES[i % len(SHAPES)](rnd))) for i in range(300)]
    now = utcnow()
    entries = [
        Entry(uuid.uuid4(), "experience", 0.5, now, 0, 1, lists[rnd.randrange(300)], "s", "r")
        for _ in range(1500)  # cards of one list share its tuple, as a load shares them
    ]
    alone = Stats()
    for e in entries:
        alone.add(card_needs(e))
    counted = Stats()
    picks = chosen_needs(entries, counted)
    assert counted.atoms == alone.atoms
    assert picks == [choose(card_needs(e), alone) for e in entries]
    index = build(entries, counted, picks)
    assert [e.filed for e in entries] == [index._fit(p) for p in picks]
