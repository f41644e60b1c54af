"""A snapshot's ordered lists saved with its file: installed on a restore, they rank exactly as
a fresh database load does, right after it, after the feed's changes and uses, as time passes
and under other weights; an order the file cannot vouch for is dropped, never used."""

from __future__ import annotations

import logging
import math
from array import array
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from memory_core.models.columns import utcnow
from memory_core.serve.retrieval import retrieve
from memory_core.serve.snapshot import Snapshot, load_snapshot
from memory_core.serve.snapshot_cache import SnapshotCache
from memory_core.serve.snapshot_file import MAGIC, layout, write
from memory_core.serve.snapshot_restore import SnapshotFiles, save
from memory_core.settings import RankingWeights
from tests.helpers.serve import add_card
from tests.memory_core.serve.test_serve_snapshot import _edit
from tests.memory_core.serve.test_snapshot_file import NS, STATES, _seed, _use

OTHER = RankingWeights(confidence=0.9, recency=0.05)


def _files(settings) -> SnapshotFiles:
    return SnapshotFiles(settings.data_dir / "snapshots", 1)


def _ordered_file(engine, settings) -> tuple[Path, int]:
    """A full load whose queries ordered its lists, saved: the file and how many orders."""
    snap = load_snapshot(engine=engine, namespace=NS)
    for state in STATES:
        retrieve(snapshot=snap, state=state, now=utcnow(), top_k=3)
    path = save(engine, _files(settings), snap)
    assert path is not None and len(snap.orders) > 3
    return path, len(snap.orders)


def _restored(engine, settings) -> Snapshot:
    snap = SnapshotCache(engine=engine, files=_files(settings)).get(NS)
    assert snap.from_file
    return snap


def _ranks(snap: Snapshot, now, weights=None) -> list:
    return [
        [
            (m.entry.card_id, m.score)
            for m in retrieve(
                snapshot=snap, state=state, now=now, top_k=k, weights=weights, query=query
            ).matches
        ]
        for state in STATES
        for k in (1, 3)
        for query in (None, "card 3 search")
    ]


def _same_as_fresh(engine, snap: Snapshot) -> None:
    """Rankings of the snapshot and a fresh load: now, two hours later (a new epoch its
    orders' loosens), under other weights (its orders not used), then now again."""
    fresh = load_snapshot(engine=engine, namespace=NS)
    now = utcnow()
    for at, weights in ((now, None), (now + timedelta(hours=2), None), (now, OTHER)):
        assert _ranks(snap, at, weights) == _ranks(fresh, at, weights)


def test_saved_orders_are_installed_and_rank_as_a_fresh_load(engine, settings) -> None:
    _seed(engine)
    _, saved = _ordered_file(engine, settings)
    snap = _restored(engine, settings)
    assert len(snap.orders) == saved and snap.orders_epoch is not None
    for cards, b, entries, keys, _ in snap.orders.values():
        assert b is snap.orders_epoch and sorted(map(id, cards)) == sorted(map(id, entries))
        assert [e.sortkey for e in entries] == list(keys)  # what list_orders._find bisects by
    _same_as_fresh(engine, snap)


def test_changes_and_uses_after_the_file_rank_as_a_fresh_load(engine, settings) -> None:
    cards = _seed(engine)
    _ordered_file(engine, settings)
    _edit(engine, cards[0].card_id, confidence=0.99, scenario="changed")
    _edit(engine, cards[1].card_id, status="archived")
    add_card(engine, namespace=NS, scenario="added", preconditions=['tool == "search"'])
    _use(engine, cards[5:9], times=3)
    snap = _restored(engine, settings)
    assert snap.orders
    _same_as_fresh(engine, snap)


def test_a_card_used_after_the_file_outranks_its_saved_key(engine, settings) -> None:
    """A use writes no feed entry: the restore reads it again and the card's key in the saved
    order is too low, so the card waits as touched and is moved by the queries' folds (the
    namespace's most used card unchanged: the saved order stands for the new epoch)."""
    cards = [
        add_card(engine, namespace=NS, scenario=f"c{i}", preconditions=['tool == "search"'],
                 confidence=0.9 - i / 100)
        for i in range(30)
    ]  # fmt: skip
    add_card(
        engine, namespace=NS, scenario="most used", preconditions=['tool == "x"'], use_count=100
    )
    tight = RankingWeights(support=0.0)  # no evidence: full support's bound stops nothing
    snap = load_snapshot(engine=engine, namespace=NS)
    retrieve(snapshot=snap, state={"tool": "search"}, now=utcnow(), top_k=1, weights=tight)
    assert save(engine, _files(settings), snap) is not None and snap.orders
    _use(engine, cards[-1:], times=60)  # the least confident card, now the best
    restored = _restored(engine, settings)
    assert restored.orders
    assert not restored.touched  # moved in the load, not by the first query's fold
    fresh = load_snapshot(engine=engine, namespace=NS)
    for one in (restored, fresh):
        top = retrieve(snapshot=one, state={"tool": "search"}, now=utcnow(), top_k=1, weights=tight)
        assert top.matches[0].entry.card_id == cards[-1].card_id
    assert restored.orders
    _same_as_fresh(engine, restored)


def _sections(path: Path) -> tuple[dict, dict[str, tuple[str, bytes]]]:
    data = path.read_bytes()
    end = data.index(b"\n", len(MAGIC))
    header = orjson.loads(data[len(MAGIC) : end])
    at, out = end + 1, {}
    for name, kind, size in header["sections"]:
        out[name] = (kind, data[at : at + size])
        at += size
    return header, out


def _rewrite(path: Path, **changed: bytes) -> None:
    """The file with some sections replaced, its header's lengths and CRC made to match."""
    header, sections = _sections(path)
    for name, value in changed.items():
        sections[name] = (sections[name][0], value)
    header["sections"], body = layout([(n, k, b) for n, (k, b) in sections.items()])
    for k in ("format", "byteorder", "body_bytes", "crc32"):
        del header[k]
    write(path, header, body)


def _column(sections: dict, name: str) -> array:
    kind, data = sections[name]
    column = array(kind)
    column.frombytes(data)
    return column


def _damaged(path: Path, damage: str) -> dict[str, bytes]:
    header, s = _sections(path)
    sizes, cards, keys = (_column(s, n) for n in ("order_sizes", "order_cards", "order_keys"))
    names = orjson.loads(s["order_names"][1])
    first = next(i for i, n in enumerate(sizes) if n > 2)  # an order of 3 cards or more
    lo = sum(sizes[:first])
    hi = lo + sizes[first]
    if damage == "out_of_range":
        cards[lo] = 10_000
    elif damage == "negative":
        cards[lo] = -1
    elif damage == "duplicate":
        cards[lo + 1] = cards[lo]
    elif damage == "not_its_cards":  # a card of the file, not of this list
        cards[lo] = next(p for p in range(header["cards"]) if p not in cards[lo:hi])
    elif damage == "wrong_length":
        sizes[first] += 1
    elif damage == "nan_key":
        keys[lo + 1] = math.nan
    elif damage == "unsorted_keys":
        keys[lo] = keys[hi - 1] + 1.0
    elif damage == "keys_too_high":  # ascending, finite, but below the cards' bounds
        for i in range(lo, hi):
            keys[i] = 5.0 + i
    elif damage == "unknown_name":
        names[first] = ["eq", "tool", ["s", "no such tool"]]
    elif damage == "bad_epoch":
        return {"order_epoch": orjson.dumps({"weights": {"confidence": "x"}, "at": 1})}
    elif damage == "short_keys":
        return {"order_keys": keys.tobytes()[:-8]}
    return {
        "order_sizes": sizes.tobytes(),
        "order_cards": cards.tobytes(),
        "order_keys": keys.tobytes(),
        "order_names": orjson.dumps(names),
    }


ALL_DROPPED = {"out_of_range", "negative", "wrong_length", "bad_epoch", "short_keys"}
DAMAGES = [
    *sorted(ALL_DROPPED),
    "duplicate",
    "not_its_cards",
    "nan_key",
    "unsorted_keys",
    "keys_too_high",
    "unknown_name",
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_malformed_order_is_dropped_and_rankings_stay_exact(
    engine, settings, damage, caplog
) -> None:
    _seed(engine)
    path, saved = _ordered_file(engine, settings)
    _rewrite(path, **_damaged(path, damage))
    with caplog.at_level(logging.WARNING):
        snap = _restored(engine, settings)
    assert "saved orders" in caplog.text
    assert len(snap.orders) == (0 if damage in ALL_DROPPED else saved - 1)
    _same_as_fresh(engine, snap)


def test_a_malformed_card_column_means_a_full_load(engine, settings, caplog) -> None:
    """A card column's index out of range would wrap (a wrong card), never: Rejected."""
    _seed(engine, 12)
    path, _ = _ordered_file(engine, settings)
    _, s = _sections(path)
    kinds = _column(s, "kind")
    kinds[3] = -1
    _rewrite(path, kind=kinds.tobytes())
    with caplog.at_level(logging.WARNING):
        snap = SnapshotCache(engine=engine, files=_files(settings)).get(NS)
    assert not snap.from_file and "out of range" in caplog.text


def test_a_save_waits_for_the_background_ordering(monkeypatch) -> None:
    """A big namespace's file is written once its lists are ordered, so they are saved."""
    import threading
    import time
    from types import SimpleNamespace

    from memory_core.serve import saved_orders

    monkeypatch.setattr(saved_orders, "WARM_FROM", 1)
    snap = SimpleNamespace(entries={1: None}, warming="started")
    threading.Timer(0.3, lambda: setattr(snap, "warming", "done")).start()
    started = time.monotonic()
    saved_orders.wait_for_orders(snap)  # type: ignore[arg-type]
    assert snap.warming == "done" and 0.25 < time.monotonic() - started < 5
    snap.warming = "small"  # nothing being ordered: no wait
    started = time.monotonic()
    saved_orders.wait_for_orders(snap)  # type: ignore[arg-type]
    assert time.monotonic() - started < 0.2
