"""Why recurring errors lose rank 1: bench/lessons.py's other-tasks folds, event by event.

For every event of the recurring-errors score (a failed call whose error signature the
learning runs also had) whose first warning card is not ranked first, prints the cards served
at ranks 1-3 and the first one that warns, with their score terms (serve/retrieval.py), every
active card warning of that error that did not apply, and a cause:

* other tool: no card about the called tool warns of it; the error was learned on others;
* outranked: a card about the called tool warns of it, and a card about another error of
  that tool scored higher (its terms say why);
* split: more than one active card of the called tool warns of the same error.

Per fold it also counts the (tool, error) pairs warned by more than one card (splits) and the
cards warning of more than one error of a tool (merged). Same folds as bench/lessons.py.

    python bench/lessons_losses.py data/tau-bench-airline/trajectories.json [--only 2 4]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lessons import _group  # noqa: E402
from bench.lessons_learn import _learn  # noqa: E402

_TOOL = re.compile(r'^tool == "(.*)"$')


def tool_of(card: Any) -> str:
    """The tool a pre-call card is keyed on ('' when it is keyed on none)."""
    for p in card.preconditions:
        m = _TOOL.match(p.strip())
        if m:
            return m.group(1)
    return ""


def _terms(m: Any) -> str:
    s, e = m.score, m.entry
    return (
        f"score {s.score:.3f} = conf {s.confidence:.3f}, recency {s.recency:.2f}, "
        f"use {s.use_frequency:.2f}, specificity {s.specificity:.2f}, support {s.support:.3f} "
        f"(rows {e.evidence_count}, runs {e.run_count})"
    )


def _card(card: Any) -> str:
    modes = [str(fm.get("mode", "")) for fm in card.failure_modes]
    return f"{card.scenario!r}\n          preconditions {card.preconditions}; failure modes {modes}"


def _shape(cards: dict[Any, Any]) -> tuple[int, int]:
    """(tool, error) pairs warned by several cards; cards warning of several errors."""
    from memory_core.task_state import normalise_error

    by_pair: Counter[tuple[str, str]] = Counter()
    merged = 0
    for c in cards.values():
        modes = {normalise_error(str(fm.get("mode", ""))) for fm in c.failure_modes}
        if tool_of(c) and len(modes) > 1:
            merged += 1
        for mode in modes:
            by_pair[(tool_of(c), mode)] += bool(tool_of(c))
    return sum(n > 1 for n in by_pair.values()), merged


@dataclass
class Event:
    """One recurring error of a test run: the failed call, the state before it, its error."""

    run: str
    index: int
    call: Any
    state: dict[str, Any]
    signature: str
    code: str


def learned_events(
    learn: list[tuple[str, dict[str, Any]]],
    test: list[tuple[str, dict[str, Any]]],
    work: Path,
    nights: int = 3,
) -> tuple[Any, list[Event]]:
    """Learn `learn` as bench/lessons.py does; the engine and the test runs' events (a failed
    call whose error signature the learning runs also had)."""
    from memory_core.replay import parse_all
    from memory_core.task_state import error_code, error_signature, states_before_calls

    engine = _learn(learn, work, nights=nights)
    learned, _ = parse_all(learn, namespace="bench", task_type="default")
    tested, _ = parse_all(test, namespace="bench", task_type="default")
    seen = {
        error_signature(s.error, s.args)
        for t in learned
        for s in t.steps
        if s.type == "tool_call" and s.tool and s.error
    }
    events = []
    for t in tested:
        calls = [s for s in t.steps if s.type == "tool_call" and s.tool]
        states = states_before_calls(calls, task_type=t.task_type, agent_id=t.agent_id)
        for i, (call, state) in enumerate(zip(calls, states, strict=True)):
            sig = error_signature(call.error, call.args) if call.error else ""
            if sig and sig in seen:
                code = error_code(call.error or "") or ""
                events.append(Event(t.key, i, call, state, sig, code))
    return engine, events


def fold_losses(
    learn: list[tuple[str, dict[str, Any]]],
    test: list[tuple[str, dict[str, Any]]],
    work: Path,
    nights: int = 3,
) -> tuple[list[str], Counter[str], tuple[int, int]]:
    """The report lines of one fold's lost events, the causes counted, and its card shape."""
    from memory_core.models.columns import utcnow
    from memory_core.preconditions import make_context, normalise_value
    from memory_core.replay import card_warns, served_cards
    from memory_core.serve.retrieval import holds, retrieve

    engine, events = learned_events(learn, test, work, nights)
    snapshot, cards = served_cards(engine=engine, namespace="bench")
    now, lines, causes = utcnow(), [], Counter[str]()
    for ev in events:
        call, state, sig, code = ev.call, ev.state, ev.signature, ev.code
        causes["events"] += 1
        found = retrieve(snapshot=snapshot, state=state, now=now, top_k=len(cards) or 1)
        ranked = [m for m in found.matches if m.entry.card_id in cards]
        warns = [card_warns(cards[m.entry.card_id], signature=sig, code=code) for m in ranked]
        rank = warns.index(True) + 1 if True in warns else None
        if rank == 1:
            causes["rank 1"] += 1
            continue
        warners = [c for c in cards.values() if card_warns(c, signature=sig, code=code)]
        same_tool = [c for c in warners if tool_of(c) == call.tool]
        cause = "other tool" if not same_tool else "outranked"
        causes[cause] += 1
        if len(same_tool) > 1:
            causes["split"] += 1
            cause += ", split"
        lines.append(
            f"\n{ev.run[:19]} call {ev.index} {call.tool}: {sig!r}, first warning at rank {rank} "
            f"({cause}; learned on {sorted({tool_of(c) for c in warners})})"
        )
        for r, (m, w) in enumerate(zip(ranked, warns, strict=True), start=1):
            if r <= 3 or w:
                lines.append(
                    f"  #{r} warns={w} {_terms(m)}\n          {_card(cards[m.entry.card_id])}"
                )
            if w and r > 3:
                break
        norm = {str(k): normalise_value(v) for k, v in state.items()}
        context, keys = make_context(norm), frozenset(norm)
        served = {m.entry.card_id for m in ranked}
        for c in warners:
            if c.card_id not in served:
                e = snapshot.entries[c.card_id]
                lines.append(
                    f"  not applicable (holds={holds(e.compiled, context, keys)}): {_card(c)}"
                )
    shape = _shape(cards)
    engine.dispose()
    return lines, causes, shape


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--only", type=int, nargs="+", help="run only these folds (0-based)")
    ap.add_argument(
        "--nights", type=int, default=3, help="learn the runs in this many nights, by task"
    )
    args = ap.parse_args()
    from memory_core.ingest.store import iter_sources

    records = [(n, r) for n, r in iter_sources([str(args.path)]) if isinstance(r, dict)]
    groups = sorted({_group(r, n) for n, r in records})
    base = Path(tempfile.mkdtemp(prefix="lessons-losses-"))
    total: Counter[str] = Counter()
    shapes: dict[int, tuple[int, int]] = defaultdict(tuple)
    for f in range(args.folds):
        if args.only is not None and f not in args.only:
            continue
        held = set(groups[f :: args.folds])
        learn = [(n, r) for n, r in records if _group(r, n) not in held]
        test = [(n, r) for n, r in records if _group(r, n) in held]
        lines, causes, shapes[f] = fold_losses(learn, test, base / f"fold{f}", args.nights)
        print(
            f"=== fold {f}: split (tool, error) pairs {shapes[f][0]}, merged cards {shapes[f][1]}"
        )
        print("\n".join(lines))
        total.update(causes)
    print("\ntotal:", dict(total))


if __name__ == "__main__":
    main()
