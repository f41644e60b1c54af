"""The active cards the nightly learns from a runs file, each with a key stable across runs.

Learns as bench/lessons.py does (the nightly stages, rules, default settings, `info` dropped)
and prints every active card: its key (pattern, tool, failure modes, preconditions; never the
card id, which differs each run), confidence, supporting task groups and action steps. The
key is what tests/memory_core/retrospect/labelled_cards.json labels by reading.

    python bench/lessons_cards.py data/tau-bench-airline/trajectories.json [--out JSON]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lessons_learn import _learn  # noqa: E402

FIX_NOTE = "this call succeeded"


def card_key(card: Any) -> str:
    """Pattern, failure modes, preconditions and whether it gives a fix (a step that succeeded)
    or only a caution: the same lesson has the same key every run."""
    modes = sorted(str(m.get("mode", "")) for m in card.failure_modes)
    pattern = str(card.provenance.get("pattern", ""))
    fix = any(str(a.get("note", "")).startswith(FIX_NOTE) for a in card.action_sequence)
    return json.dumps([pattern, modes, sorted(card.preconditions), fix], ensure_ascii=False)


def active_cards(
    engine: Any, namespace: str, statuses: tuple[str, ...] = ("active",)
) -> list[dict[str, Any]]:
    """Every card of the namespace in these statuses, as a reader sees it."""
    from sqlmodel import Session, col, select

    from memory_core.models.card import Card, CardEvidence

    out = []
    with Session(engine) as s:
        cards = s.exec(
            select(Card).where(
                col(Card.namespace) == namespace, col(Card.status).in_(list(statuses))
            )
        ).all()
        for c in cards:
            ev = s.exec(select(CardEvidence).where(col(CardEvidence.card_id) == c.card_id)).all()
            groups = {
                str(e.result.get("group"))
                for e in ev
                if e.result.get("role", "supports") == "supports" and e.result.get("group")
            }
            out.append(
                {
                    "key": card_key(c),
                    "status": c.status,
                    "scenario": c.scenario,
                    "confidence": round(c.confidence, 3),
                    "supporting_groups": len(groups),
                    "preconditions": list(c.preconditions),
                    "steps": [
                        f"{a.get('tool')} {a.get('params_template')} ({a.get('note', '')})"
                        for a in c.action_sequence
                    ],
                    "failure_modes": list(c.failure_modes),
                }
            )
    return sorted(out, key=lambda r: r["key"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from memory_core.ingest.store import iter_sources

    records = [(n, r) for n, r in iter_sources([str(args.path)]) if isinstance(r, dict)]
    engine = _learn(records, Path(tempfile.mkdtemp(prefix="lessons-cards-")))
    cards = active_cards(engine, "bench")
    if args.out:
        args.out.write_text(json.dumps(cards, indent=2, ensure_ascii=False) + "\n")
    for c in cards:
        print(f"{c['confidence']:.2f} groups={c['supporting_groups']} {c['scenario']}")
        print(f"     when {' && '.join(c['preconditions'])}")
        for step in c["steps"]:
            print(f"     - {step}")
        for m in c["failure_modes"]:
            print(f"     ! {m.get('mode')} / {m.get('handling')}")


if __name__ == "__main__":
    main()
