"""The candidate index: every shape of precondition is filed under a need, and the cards a
state makes candidates always include every card that holds (checked against brute force)."""

from __future__ import annotations

import random
import uuid

from memory_core.models.columns import utcnow
from memory_core.preconditions import compile_all, make_context, normalise_value
from memory_core.serve.atoms import needs
from memory_core.serve.index import READERS_KEPT, Stats, build, card_needs
from memory_core.serve.retrieval import holds
from memory_core.serve.snapshot import Entry


def _entry(pre: list[str]) -> Entry:
    compiled = tuple(compile_all(pre))
    now = utcnow()
    return Entry(uuid.uuid4(), "experience", 0.5, now, 0, 1, compiled, "s", "s")


def test_needs_of_every_shape() -> None:
    assert needs('tool in ["a", "b"]') == (("eq", (("tool", ("s", "a")), ("tool", ("s", "b")))),)
    assert needs('tool == "a" || last_tool == "b"') == (
        ("eq", (("tool", ("s", "a")), ("last_tool", ("s", "b")))),
    )
    assert needs('tool == "a" || retry_count > 1') == ()  # one branch has no equality
    assert needs("3 <= retry_count") == (("range", "retry_count", ">=", 3.0),)
    assert needs('last_error.contains("time out")') == (("substring", "last_error", "time out"),)
    assert needs('!last_error.contains("x")') == ()
    assert needs('x ? tool == "a" : true') == ()
    # an operator inside a call or a quote is no conjunction (this recursed without end)
    assert needs('x.exists(y, y > 1 && y < 3) && tool == "a"') == (("eq", (("tool", ("s", "a")),)),)
    assert needs("f(a || b) || c == 1") == ()
    # a quoted operator splits nothing (an escaped quote's literal is just not indexed)
    assert needs('a == "q\\" || z" && b == 1') == (("eq", (("b", ("i", 1)),)),)
    both = _entry(["latency_ms >= 100 && latency_ms < 400"])
    assert ("window", "latency_ms", 100.0, 400.0) in card_needs(both)


SHAPES = [
    lambda r: [f'tool == "t{r.randrange(5)}"', f"retry_count >= {r.randrange(4)}"],
    lambda r: [f'tool in ["t{r.randrange(5)}", "t{r.randrange(5)}"]'],
    lambda r: [f'tool == "t{r.randrange(5)}" || last_tool == "t{r.randrange(5)}"'],
    lambda r: [f"retry_count > {r.randrange(4)}", f"latency_ms < {r.randrange(1000)}"],
    lambda r: [f"latency_ms >= {(lo := r.randrange(900))} && latency_ms <= {lo + 50}"],
    lambda r: [f"latency_ms >= {(lo := r.randrange(500))} && latency_ms < {lo + 5000}"],
    lambda r: [f'last_error.contains("e{r.randrange(6)}")'],
    lambda r: [f'last_error.endsWith("e{r.randrange(6)}") && tool == "t{r.randrange(5)}"'],
    lambda r: ['tool == "t1" ? retry_count > 1 : true'],
    lambda r: ["true"],
]


def test_candidates_include_every_card_that_holds_and_few_more() -> None:
    rnd = random.Random(5)
    entries = [_entry(SHAPES[i % len(SHAPES)](rnd)) for i in range(2000)]
    stats = Stats()
    for e in entries:
        stats.add(card_needs(e))
    index = build(entries, stats)
    kinds = {e.filed[0] if e.filed else None for e in entries}
    assert {"eq", "range", "window", "substring", "has", None} <= kinds
    total = 0
    for _ in range(300):
        state = {
            "tool": f"T{rnd.randrange(6)}",
            "last_tool": f"t{rnd.randrange(6)}",
            "retry_count": rnd.choice([0, 1, 2, 3, 2.0, "2"]),
            "latency_ms": rnd.choice([rnd.randrange(1200), rnd.random() * 1000]),
            "last_error": f"err e{rnd.randrange(7)}",
        }
        for drop in rnd.sample(sorted(state), rnd.randrange(3)):
            state.pop(drop)
        norm = {k: normalise_value(v) for k, v in state.items()}
        ctx, keys = make_context(norm), frozenset(norm)
        held = {e.card_id for e in entries if holds(e.compiled, ctx, keys)}
        found = index.candidates(norm)
        assert len(found) == len({e.card_id for e in found})  # no card twice
        assert held <= {e.card_id for e in found}, state
        total += len(found)
    assert total / 300 < len(entries) / 2  # narrowed, not every card


def test_changes_keep_the_index_exact() -> None:
    rnd = random.Random(9)
    entries = [_entry(SHAPES[i % len(SHAPES)](rnd)) for i in range(200)]
    stats = Stats()
    for e in entries:
        stats.add(card_needs(e))
    index = build(entries, stats)
    for e in entries[:100]:
        index.remove(e)
    for e in entries[:50]:
        index.add(e, min(card_needs(e), key=stats.cost, default=None))
    live = entries[:50] + entries[100:]
    for lat in (0, 120, 480, 960, 5000):
        norm = {"tool": "t1", "last_tool": "t2", "retry_count": 2, "latency_ms": lat}
        norm["last_error"] = "e3"
        ctx, keys = make_context(norm), frozenset(norm)
        found = {e.card_id for e in index.candidates(norm)}
        assert found <= {e.card_id for e in live}  # removed cards are gone
        assert {e.card_id for e in live if holds(e.compiled, ctx, keys)} <= found


def test_explain_keeps_a_bounded_sample_of_each_variables_readers() -> None:
    cards = [_entry([f"retry_count > {i}"]) for i in range(READERS_KEPT + 100)]
    stats = Stats()
    for e in cards:
        stats.add(card_needs(e))
    index = build(cards, stats)
    assert len(index.readers["retry_count"]) == READERS_KEPT
    assert len(index.sample({"retry_count": -1}, limit=50)) == 50
    for e in cards[:READERS_KEPT]:  # removed readers leave; cards added later refill
        index.remove(e)
    assert index.readers["retry_count"] == {}
    index.add(cards[0], None)
    assert list(index.readers["retry_count"].values()) == [cards[0]]


def _lists(index) -> dict:
    """Every list of the index, as card ids in order, by where it is."""
    out: dict = {("none",): [e.card_id for e in index.unindexed]}
    for var, by in index.eq.items():
        out |= {("eq", var, k): [e.card_id for e in v] for k, v in by.items()}
    for name, side in (("above", index.above), ("below", index.below)):
        out |= {(name, var): (list(b), [e.card_id for e in c]) for var, (b, c) in side.items()}
    for var, by in index.substring.items():
        out |= {("sub", var, k): [e.card_id for e in v] for k, v in by.items()}
    for var, (_, bins) in index.windows.items():
        out |= {("win", var, k): [e.card_id for e in v] for k, v in bins.items()}
    out |= {("has", var): sorted(d) for var, d in index.has.items()}
    return out


def test_a_batch_of_changes_files_as_one_at_a_time_and_leaves_old_lists_alone() -> None:
    """A feed catch-up takes its cards out of and into each list once: the lists end as
    taking each card out and filing it one at a time leave them, and a list a reader holds
    is never changed in place."""
    rnd = random.Random(21)
    entries = [_entry(SHAPES[i % len(SHAPES)](rnd)) for i in range(400)]
    stats = Stats()
    for e in entries:
        stats.add(card_needs(e))
    batch, single = build(entries, stats), build(entries, stats)
    held = {k: [list(v[0]), list(v[1])] if k[0] in ("above", "below") else list(v)
            for k, v in _lists(batch).items()}  # fmt: skip
    # what readers hold: the list objects themselves, and copies of what they held
    objects = [v for by in batch.eq.values() for v in by.values()]
    objects += [cards for _, cards in batch.above.values()] + [batch.unindexed]
    objects += [v for _, bins in batch.windows.values() for v in bins.values()]
    copies = [list(v) for v in objects]
    gone = rnd.sample(entries, 150)
    new = [_entry(SHAPES[rnd.randrange(len(SHAPES))](rnd)) for _ in range(120)]
    for e in new:
        stats.add(card_needs(e))
    filed = [(e, min(card_needs(e), key=stats.cost, default=None)) for e in new + gone[:30]]
    batch.remove_many(gone)
    batch.add_many(filed)
    for e in gone:
        single.remove(e)
    for e, need in filed:
        single.add(e, need)
    assert _lists(batch) == _lists(single)
    assert _lists(batch) != held  # it did change
    # the lists held before are untouched: every change replaced them
    assert [list(v) for v in objects] == copies
    live = {e.card_id: e for e in entries if e not in gone} | {e.card_id: e for e, _ in filed}
    for lat in (0, 120, 480, 960, 5000):
        norm = {"tool": "t1", "last_tool": "t2", "retry_count": 2, "latency_ms": lat}
        norm["last_error"] = "e3"
        ctx, keys = make_context(norm), frozenset(norm)
        found = {e.card_id for e in batch.candidates(norm)}
        assert found <= set(live)
        assert {c for c, e in live.items() if holds(e.compiled, ctx, keys)} <= found
