"""Top k by score bounds ranks exactly as scoring every match does (random card sets, states,
weights, times and changes, with ties and the support term), and checks fewer cards."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from datetime import timedelta

from memory_core.models.columns import utcnow
from memory_core.preconditions import compile_all, make_context, normalise_value
from memory_core.serve.index import Stats, build, card_needs
from memory_core.serve.retrieval import TIE, Ranked, holds, retrieve, score_entry, specificity
from memory_core.serve.snapshot import Entry, Snapshot, touched
from memory_core.serve.topk import TopQuery, top_matches
from memory_core.settings import RankingWeights

SHAPES = [
    lambda r: [f'tool == "t{r.randrange(3)}"'],
    lambda r: [f'tool == "t{r.randrange(3)}"', f"retry_count >= {r.randrange(3)}"],
    lambda r: [f'tool in ["t{r.randrange(3)}", "t{r.randrange(3)}"]'],
    lambda r: [f"retry_count > {r.randrange(3)}"],
    lambda r: [f'last_error.contains("e{r.randrange(3)}")'],
    lambda r: [],
    lambda r: ["true"],
]
WORDS = ["retry", "backoff", "page", "smaller", "token", "limit", "search", "cache"]


def _entry(rnd: random.Random, now, i: int) -> Entry:
    pre = SHAPES[rnd.randrange(len(SHAPES))](rnd)
    text = " ".join(rnd.sample(WORDS, rnd.randrange(1, 4)))
    return Entry(
        uuid.UUID(int=rnd.getrandbits(128)),
        "fact" if rnd.random() < 0.1 else "experience",
        rnd.choice([0.3, 0.5, 0.5, 0.7, 0.9, 0.9004]),  # equal and near-equal (a tie step)
        now - timedelta(hours=rnd.choice([0, 0, 1, 30, 24 * 40]) - rnd.choice([0, 0, 2])),
        rnd.choice([0, 0, 1, 3, 7]),
        rnd.choice([1, 1, 1, 2, 5]),
        tuple(compile_all(pre)),
        "card",  # one scenario: equal texts stay equal
        rnd.choice([text, "same words"]),  # equal texts: the tie goes to the id
        trust=rnd.choice([1.0, 1.0, 0.8, 0.5]),
        run_count=rnd.choice([0, 1, 1, 2, 4]),
    )


def _snapshot(entries: list[Entry]) -> Snapshot:
    stats = Stats()
    for e in entries:
        stats.add(card_needs(e))
    index = build(entries, stats)
    for e in entries:
        e.indexed = True
    by_id = {e.card_id: e for e in entries}
    return Snapshot("t", by_id, index, stats, 0, max_uses=max(e.use_count for e in entries))


def _weights(rnd: random.Random) -> RankingWeights:
    pick = lambda: rnd.choice([0.0, 0.1, 0.3, 0.5])  # noqa: E731
    return RankingWeights(
        confidence=pick(),
        recency=pick(),
        use_frequency=pick(),
        specificity=pick(),
        support=rnd.choice([0.0, 0.3, 1.0]),
        support_counts=rnd.choice(["rows", "runs"]),
        text_similarity=rnd.choice([0.0, 0.3, 0.9]),
    )


def _key(r) -> list[tuple]:
    return [(m.entry.card_id, m.score.model_dump()) for m in r.matches]


def test_bounded_top_k_ranks_exactly_as_scoring_every_match() -> None:
    rnd = random.Random(21)
    now = utcnow()
    for trial in range(60):
        entries = [_entry(rnd, now, i) for i in range(rnd.choice([40, 120, 400]))]
        snap = _snapshot(entries)
        w = _weights(rnd)
        for q in range(15):
            if q % 5 == 4:  # a card changes: more uses (the namespace's most may rise)
                old = rnd.choice(list(snap.entries.values()))
                snap.index.remove(old)
                del snap.entries[old.card_id]
                more = rnd.choice([1, 9])
                snap._add(replace(old, use_count=old.use_count + more, bound=(None, 0.0)))
            if q % 5 == 2:  # used and given feedback in place, as the service does
                e = rnd.choice(list(snap.entries.values()))
                e.use_count += 1
                e.seen_at = now + timedelta(minutes=10)
                e.confidence = rnd.choice([0.2, 0.95])
                snap.max_uses = max(snap.max_uses, e.use_count)
                touched(e)
            at = now + timedelta(minutes=rnd.choice([0, 5, 90, -30, 60 * 24 * 3]))
            state = {
                "tool": f"t{rnd.randrange(4)}",
                "retry_count": rnd.randrange(4),
                "last_error": f"e{rnd.randrange(4)} on x",
            }
            if rnd.random() < 0.3:
                state.pop("tool")
            query = rnd.choice([None, "retry page", "cache token limit", "the"])
            top_k = rnd.choice([1, 3, 5, 50])
            kw = dict(snapshot=snap, state=state, now=at, top_k=top_k, weights=w, query=query)
            exhaustive = retrieve(**kw, bounded_from=10**9)  # type: ignore[arg-type]
            bounded = retrieve(**kw, bounded_from=0)  # type: ignore[arg-type]
            assert _key(bounded) == _key(exhaustive), (trial, q, w, state, query, top_k)
            assert bounded.candidates == exhaustive.candidates


def test_bounds_check_fewer_cards_when_many_match() -> None:
    rnd = random.Random(3)
    now = utcnow()
    entries = [_entry(rnd, now, i) for i in range(2000)]
    for e in entries:
        e.compiled = tuple(compile_all(["true"]))  # every card holds
    snap = _snapshot(entries)
    w = RankingWeights()
    norm = {"tool": normalise_value("t1")}
    ctx, keys = make_context(norm), frozenset(norm)
    pool = [e for e in entries if e.kind == "experience"]
    q = TopQuery(
        kinds=("experience",),
        now=now,
        w=w,
        query=None,
        top_k=5,
        holds=lambda e: holds(e.compiled, ctx, keys),
        score=lambda e: Ranked(e, score_entry(e, now=now, max_uses=snap.max_uses, w=w, query=None)),
        specificity=specificity,
        tie=TIE,
    )
    found, checked = top_matches(entries, snapshot=snap, q=q)
    assert len(found) >= 5
    assert checked < len(pool) / 4  # stopped long before the end
    best = max(round(m.score.score / TIE) for m in found)
    full = retrieve(snapshot=snap, state=norm, now=now, top_k=5, bounded_from=10**9)
    assert round(full.matches[0].score.score / TIE) == best
