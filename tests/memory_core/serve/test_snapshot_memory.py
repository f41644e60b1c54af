"""What a loaded snapshot holds per card stays small (issue #21: a million cards under 1 GB):
the C heap's free pages handed back after a load, values the cards share held once."""

from __future__ import annotations

import memory_core.serve.snapshot_build as snapshot_build
from memory_core.serve.snapshot_cache import SnapshotCache
from tests.helpers.serve import add_card

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
