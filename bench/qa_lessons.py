"""Lessons on a domain without tool errors: question answering over LoCoMo (bench/qa_runs.py).

Learns with the nightly's stages (rules, validation, consolidation, the serving gate; the
memory never sees `info`) and reports:

* dev: the active cards learned from every run, each with its label by reading
  (tests/memory_core/retrospect/labelled_answer_cards.json: useful / trivial / wrong, with a
  reason), how many a reader would act on (useful), and how many key on a literal answer
  (a precondition that reads the final-answer call's arguments);
* held out (2 folds by question): the cards active after learning on one half, replayed on the
  other half's runs: at how many runs a card warned (one warning a run, at its first matching
  call), the share of those runs that failed, and the share of all runs that failed (what a
  caution must beat), with 95% Wilson intervals.

    python bench/qa_lessons.py ../shared/data/locomo [--questions 200] [--trials 5]

Writes bench/results/qa_lessons.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lessons_cards import active_cards  # noqa: E402
from bench.lessons_learn import _learn  # noqa: E402
from bench.qa_runs import generate, load, summary  # noqa: E402

RESULTS = REPO / "bench" / "results"
LABELS = REPO / "tests" / "memory_core" / "retrospect" / "labelled_answer_cards.json"


def _labels() -> dict[str, dict[str, Any]]:
    if not LABELS.is_file():
        return {}
    return {json.dumps(r["key"], ensure_ascii=False): r for r in json.loads(LABELS.read_text())}


def _literal_keyed(engine: Any, cards: list[dict[str, Any]]) -> list[str]:
    """Active cards that read an argument of the final-answer call (the data's final tool)."""
    from memory_core.models.drafts import DraftCard
    from memory_core.retrospect.contrast_answers import keys_on_answer, stored_final_answers

    final = stored_final_answers(engine, ["bench"])["bench"]
    out = []
    for c in cards:
        d = DraftCard(
            pattern="x",
            scenario=c["scenario"],
            preconditions=c["preconditions"],
            action_sequence=[],
            expected_outcome="",
            actual_outcome="",
            failure_modes=[],
            confidence=0.5,
            evidence=[],
            provenance={},
        )
        if keys_on_answer(d, final):
            out.append(c["scenario"])
    return out


def _wilson(k: int, n: int) -> list[float] | None:
    from memory_core.effects.estimate import wilson

    return [round(x, 3) for x in wilson(successes=k, n=n, z=1.96)] if n else None


def replay(cards: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Warnings of the cards on runs they did not learn from (one a run and card)."""
    from memory_core.models.trajectory import Step
    from memory_core.preconditions import compile_precondition, holds_all, make_context
    from memory_core.task_state import states_before_calls

    compiled = [[compile_precondition(p) for p in c["preconditions"]] for c in cards]
    fired = right = failed = 0
    per_card = [[0, 0] for _ in cards]
    for r in runs:
        calls = [
            Step(index=i, type="tool_call", tool=s["tool"], args=s["args"])
            for i, s in enumerate(r["steps"])
            if s["type"] == "tool_call"
        ]
        states = states_before_calls(calls, task_type="default", agent_id=None)
        bad = r["outcome"] == "failure"
        failed += bad
        warned = False
        for j, pre in enumerate(compiled):
            if any(holds_all(pre, make_context(st), frozenset(st)) for st in states):
                per_card[j][0] += 1
                per_card[j][1] += bad
                warned = True
        fired += warned
        right += warned and bad
    return {
        "runs": len(runs),
        "failed_share": round(failed / max(len(runs), 1), 3),
        "warned_runs": fired,
        "warned_failed_share": round(right / fired, 3) if fired else None,
        "warned_failed_ci": _wilson(right, fired),
        "by_card": [
            {"scenario": c["scenario"], "warned": n, "failed": k}
            for c, (n, k) in zip(cards, per_card, strict=True)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    """Learn on the QA runs, label and replay the active cards, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("locomo", type=Path)
    p.add_argument("--questions", type=int, default=200)
    p.add_argument("--trials", type=int, default=5)
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    runs = generate(load(a.locomo), n_questions=a.questions, trials=a.trials)
    labels = _labels()
    engine = _learn([(r["id"], r) for r in runs], Path(tempfile.mkdtemp(prefix="qa-lessons-")))
    cards = active_cards(engine, "bench")
    literal = _literal_keyed(engine, cards)
    engine.dispose()
    dev = []
    for c in cards:
        label = labels.get(c["key"], {})
        dev.append(
            {
                "scenario": c["scenario"],
                "preconditions": c["preconditions"],
                "confidence": c["confidence"],
                "supporting_groups": c["supporting_groups"],
                "label": label.get("label", "unlabelled"),
                "reason": label.get("reason", ""),
            }
        )
    tasks = sorted({r["task_id"] for r in runs})
    folds = []
    for k in range(2):
        test_tasks = set(tasks[k::2])
        learn = [r for r in runs if r["task_id"] not in test_tasks]
        test = [r for r in runs if r["task_id"] in test_tasks]
        eng = _learn([(r["id"], r) for r in learn], Path(tempfile.mkdtemp(prefix="qa-fold-")))
        learned = active_cards(eng, "bench")
        eng.dispose()
        folds.append({"active": len(learned), **replay(learned, test)})
    out = {
        "data": summary(runs),
        "dev": {
            "active": len(cards),
            "useful": sum(c["label"] == "useful" for c in dev),
            "trivial": sum(c["label"] == "trivial" for c in dev),
            "wrong": sum(c["label"] == "wrong" for c in dev),
            "unlabelled": sum(c["label"] == "unlabelled" for c in dev),
            "keyed_on_literal_answer": len(literal),
            "cards": dev,
        },
        "held_out": folds,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "qa_lessons.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "dev"}, indent=1))
    for c in dev:
        print(f"{c['label']:>10} {c['confidence']:.2f} g={c['supporting_groups']} {c['scenario']}")
    print(f"active {len(cards)}, keyed on a literal answer: {len(literal)}")
    print("keys:", *[json.dumps(card_key_of(c)) for c in cards], sep="\n  ")
    return 0


def card_key_of(card: dict[str, Any]) -> Any:
    """The card's label key (bench/lessons_cards.card_key), as JSON."""
    return json.loads(card["key"])


if __name__ == "__main__":
    sys.exit(main())
