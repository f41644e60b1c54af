"""Would a tool's reminders be better ordered by the kinds of argument their errors came with?

An analysis for bench/lessons.py's recurring errors, not a product path. A tool's reminder
(a card keyed on the tool alone) warns of one error; its profile is the keyable argument
features (memory_core.retrospect.call_features: enumerated words, identifier kinds) that
every one of its evidence calls had, its evidence spanning at least two task groups (the
breadth a key needs). At each event the cards Hindsight serves are reordered, stably, with a
reminder whose profile the call contradicts (it lacks one of those features) last, and r@1 is
counted before and after. Folds as bench/lessons.py (`--dev`: learn and test on every run).

    python bench/lessons_kinds.py data/tau-bench-airline/trajectories.json [--dev]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lessons import _load  # noqa: E402
from bench.lessons_learn import task_of  # noqa: E402
from bench.lessons_losses import learned_events  # noqa: E402

MIN_GROUPS = 2


def profiles(engine: Any, ids: list[uuid.UUID]) -> dict[uuid.UUID, frozenset[str]]:
    """Each card's profile: the keyable features all its evidence calls had (>= 2 groups)."""
    from sqlmodel import Session, col, select

    from memory_core.models.card import CardEvidence
    from memory_core.models.trajectory import Trajectory
    from memory_core.retrospect.call_features import atoms, keyable

    out = {}
    with Session(engine) as s:
        for cid in ids:
            rows = s.exec(
                select(CardEvidence.action, Trajectory.task_group, Trajectory.id)
                .join(Trajectory, col(Trajectory.id) == col(CardEvidence.trajectory_id))
                .where(col(CardEvidence.card_id) == cid)
            ).all()
            kinds = [
                frozenset(a.expr for a in atoms((act or {}).get("args")) if keyable(a))
                for act, _, _ in rows
            ]
            if kinds and len({g or str(r) for _, g, r in rows}) >= MIN_GROUPS:
                out[cid] = frozenset.intersection(*kinds)
    return out


def fold(learn: list[Any], test: list[Any], work: Path) -> Counter[str]:
    """Events, and r@1 of Hindsight's order before and after the reordering."""
    from memory_core.models.columns import utcnow
    from memory_core.replay import card_warns, served_cards
    from memory_core.retrospect.call_features import atoms, keyable
    from memory_core.serve.retrieval import retrieve, warning_scope

    engine, events = learned_events(learn, test, work)
    snapshot, cards = served_cards(engine=engine, namespace="bench")
    prof = profiles(engine, list(cards))
    now, out = utcnow(), Counter[str]()
    for ev in events:
        have = {a.expr for a in atoms(ev.call.args) if keyable(a)}
        found = retrieve(snapshot=snapshot, state=ev.state, now=now, top_k=5).matches
        ranked = [m for m in found if m.entry.card_id in cards]

        def contradicted(m: Any, have: set[str] = have) -> bool:
            p = prof.get(m.entry.card_id)
            return warning_scope(m.entry.compiled) == "tool" and p is not None and not p <= have

        out["events"] += 1
        for name, order in (("before", ranked), ("after", sorted(ranked, key=contradicted))):
            first = cards[order[0].entry.card_id] if order else None
            out[name] += bool(first and card_warns(first, signature=ev.signature, code=ev.code))
    engine.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--dev", action="store_true", help="learn and test on every run")
    args = ap.parse_args()
    records = _load(args.path)
    base = Path(tempfile.mkdtemp(prefix="lessons-kinds-"))
    splits = [(records, records)]
    if not args.dev:
        groups = sorted({task_of(r, n) for n, r in records})
        held = [set(groups[f :: args.folds]) for f in range(args.folds)]
        splits = [
            (
                [(n, r) for n, r in records if task_of(r, n) not in h],
                [(n, r) for n, r in records if task_of(r, n) in h],
            )
            for h in held
        ]
    total: Counter[str] = Counter()
    for f, (learn, test) in enumerate(splits):
        got = fold(learn, test, base / f"fold{f}")
        total.update(got)
        print(f"{'dev' if args.dev else f'fold {f}'}: {dict(got)}")
    n = total["events"] or 1
    before, after = total["before"] / n, total["after"] / n
    print(f"r@1 before {before:.3f}, after {after:.3f} ({total['events']} events)")


if __name__ == "__main__":
    main()
