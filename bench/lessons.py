"""Lessons that carry over: learned on some tasks, are they right on tasks never seen?

Built on `hindsight replay` (memory_core.replay). Runs are grouped by task (`task_id` of the
record, top level or in `metadata`; else each run is its own task). Two protocols:

* folds (the default, one file): the tasks are split into k folds; for each fold, cards are
  learned from the runs of the other folds, then the held-out runs are replayed;
* `--learn FILE --test FILE`: learn on one set of runs, replay another.

Learning is the product's nightly stages with default settings (ingest -> rule retrospect ->
validate -> consolidate). The memory never sees a record's `info` (where the expected
actions live): it is dropped from every record before learning and read only to score.

Measured on the test runs (every interval: 95% bootstrap over test tasks):
* recurring: at every call that failed with an error whose signature also occurred while
  learning, is a card warning about it served (top 5) for the state just before the call?
  `hindsight` against `tool_frequency` (the tool's most frequent learned errors, the trivial
  list) and `dense_snippets` (MiniLM retrieval of learned tool-call snippets); r@1 difference
  Hindsight minus the list, paired, with its interval;
* writes: within-tool AUROC of the first wrong write (bench/lessons_writes.py);
* served: precision and noise of the warnings served before each call
  (bench/lessons_served.py);
* cards: active cards, by pattern, and the share with a successful run in their evidence.

    python bench/lessons.py data/tau-bench-airline/trajectories.json [--folds 5]
    python bench/lessons.py --learn A.json --test B.json [--out JSON] [--llm scripted]

Writes bench/results/lessons.json (lessons_llm.json with `--llm scripted`: the rules, then
the LLM path against the tests' scripted server; measures plumbing, not a model) and a plot.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
RANKERS = ("hindsight", "tool_frequency", "dense_snippets")
SCORERS = ("hindsight", "dense kNN", "features failed elsewhere", "run outcome (ceiling)")

from bench.lessons_learn import (  # noqa: E402
    _learn,
    _snippet,
    _state_text,
    scripted_server,
)
from bench.lessons_learn import task_of as _group  # noqa: E402
from bench.lessons_metrics import (  # noqa: E402
    KS,
    by_task,
    r1_difference,
    ranking_summary,
    ratio,
    within_tool_auroc,
)
from bench.lessons_plot import plot, report  # noqa: E402
from bench.lessons_served import served_rows  # noqa: E402
from bench.lessons_writes import Baselines, card_usefulness, score_writes  # noqa: E402


def evaluate(
    learn: list[tuple[str, dict[str, Any]]],
    test: list[tuple[str, dict[str, Any]]],
    *,
    embedder: Any,
    work: Path,
    llm_url: str | None = None,
    cost: dict[str, int] | None = None,
    nights: int = 1,
    designs: dict[str, dict[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Learn from `learn`, replay `test`: per gate design (settings re-applied by the gate at
    the end of learning), the rows of every metric, each tagged with its task."""
    import numpy as np

    from memory_core.backtest.stage import run_gate
    from memory_core.models.columns import utcnow
    from memory_core.replay import parse_all, replay_trajectory, served_cards
    from memory_core.settings_groups import GateSettings
    from memory_core.task_state import error_signature, states_before_calls

    engine = _learn(learn, work, llm_url=llm_url, cost=cost, nights=nights)
    learned, _ = parse_all(learn, namespace="bench", task_type="default")
    tested, _ = parse_all(test, namespace="bench", task_type="default")
    group_of = {
        t.key: _group(r, t.key) for (_, r), t in zip(learn + test, learned + tested, strict=True)
    }
    seen: set[str] = set()
    snippets: list[tuple[str, str]] = []  # (signature or "", text)
    tool_errors: dict[str, Counter[str]] = defaultdict(Counter)
    for t in learned:
        for s in t.steps:
            if s.type == "tool_call" and s.tool:
                sig = error_signature(s.error, s.args) if s.error else ""
                if sig:
                    seen.add(sig)
                    tool_errors[s.tool][sig] += 1
                snippets.append((sig, _snippet(s)))
    vectors = np.asarray(embedder.embed([text for _, text in snippets]), dtype=np.float32)
    baselines = Baselines(learned, embedder, group_of)
    records = {t.key: r for (_, r), t in zip(test, tested, strict=True)}
    # the baselines' answers at each recurring error (the same for every design)
    fixed: dict[tuple[str, int], dict[str, Any]] = {}
    for t in tested:
        calls = [s for s in t.steps if s.type == "tool_call" and s.tool]
        states = states_before_calls(calls, task_type=t.task_type, agent_id=t.agent_id)
        for i, (step, state) in enumerate(zip(calls, states, strict=True)):
            sig = error_signature(step.error, step.args) if step.error else ""
            if not sig or sig not in seen:
                continue
            (q,) = embedder.embed([_state_text({**state, "tool": step.tool}, step.args or {})])
            top = np.argsort(-(vectors @ np.asarray(q, dtype=np.float32)), kind="stable")
            frequent = [x for x, _ in tool_errors[step.tool or ""].most_common(max(KS))]
            fixed[(t.key, i)] = {
                "group": group_of[t.key],
                "tool_frequency": [x == sig for x in frequent],
                "dense_snippets": [snippets[k][0] == sig for k in top[: max(KS)]],
            }
    out: dict[str, dict[str, Any]] = {}
    for name, gate in (designs or {"default": {}}).items():
        if designs:  # the gate again with this design's settings, on the learned namespace
            run_gate(engine=engine, rules=GateSettings(**gate), namespace="bench")
        snapshot, cards = served_cards(engine=engine, namespace="bench")
        now = utcnow()
        events: list[dict[str, Any]] = []
        for t in tested:
            rep = replay_trajectory(t, snapshot=snapshot, cards=cards, top_k=max(KS), now=now)
            for i, c in enumerate(rep.calls):
                if (t.key, i) in fixed:
                    events.append({**fixed[(t.key, i)], "hindsight": [s.warned for s in c.served]})
        common: dict[str, Any] = {
            "snapshot": snapshot,
            "cards": cards,
            "now": now,
            "groups": group_of,
        }
        out[name] = {
            "events": events,
            "writes": score_writes(tested, records, baselines=baselines, **common),
            "served": served_rows(tested, records, **common),
            "cards": card_usefulness(engine, "bench"),
        }
    return out


def summarise(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The JSON's metric sections from the rows of every fold."""
    events, writes, served = rows["events"], rows["writes"], rows["served"]
    recurring: dict[str, Any] = {s: ranking_summary(events, s) for s in RANKERS}
    recurring["events"] = len(events)
    recurring["r1_difference_vs_tool_frequency"] = r1_difference(
        events, "hindsight", "tool_frequency"
    )
    w: dict[str, Any] = {
        "positives": sum(r["positive"] for r in writes),
        "negatives": sum(not r["positive"] for r in writes),
        "tools": len({r["tool"] for r in writes}),
    }
    for s in SCORERS:
        a = within_tool_auroc(writes, s)
        w[s] = {
            "within_tool_auroc": None if a is None else round(a, 4),
            "within_tool_auroc_ci": by_task(writes, lambda rs, s=s: within_tool_auroc(rs, s)),
        }
    w["within_tool_auroc"] = w["hindsight"]["within_tool_auroc"]
    w["within_tool_auroc_ci"] = w["hindsight"]["within_tool_auroc_ci"]
    s_out: dict[str, Any] = {
        "calls": len(served),
        "calls_that_succeed": sum(r["ok"] for r in served),
        **_served(served, ""),
        "tool_reminders": _served(served, "tool_"),
        "all_warnings": _served(served, "all_"),
    }
    return {"recurring": recurring, "writes": w, "served": s_out}


def _served(rows: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    """Precision and noise of one kind of served warning (lessons, the tool's reminders, all)."""
    w, right, warned = f"{prefix}warnings", f"{prefix}right", f"{prefix}ok_warned"
    precision, noise = ratio(rows, right, w), ratio(rows, warned, "ok")
    return {
        "warnings": sum(r[w] for r in rows),
        "precision": None if precision is None else round(precision, 4),
        "precision_ci": by_task(rows, lambda rs: ratio(rs, right, w)),
        "noise": None if noise is None else round(noise, 4),
        "noise_ci": by_task(rows, lambda rs: ratio(rs, warned, "ok")),
    }


# the gate's designs compared on the same learned cards (GateSettings fields); the first is
# the settings' defaults, whose figures are the JSON's top level
DESIGNS: dict[str, dict[str, Any]] = {
    "lift, reminders from 1 group (defaults)": {},
    "min groups 2": {"lift": False, "reminder_min_groups": 2},
    "min groups 1": {"min_groups": 1, "lift": False, "reminder_min_groups": 1},
    "min groups 2, lift": {"reminder_min_groups": 2},
    "min groups 2, reminders from 1 group": {"lift": False},
    # last: the cards it promotes from validation's review go back only by a later design
    "lift, low-confidence lessons confirmed elsewhere served": {"promote_confirmed": True},
}


def run(
    records: list[tuple[str, dict[str, Any]]],
    test: list[tuple[str, dict[str, Any]]] | None,
    folds: int,
    llm_url: str | None = None,
    nights: int = 1,
    only: list[int] | None = None,
) -> dict[str, Any]:
    """Folds over `records`' tasks (`only`: these folds), or learn on `records`, test `test`."""
    from memory_core.embed.factory import build_embedder
    from memory_core.settings import Settings

    embedder = build_embedder(Settings(embedding={"provider": "local"}))
    cost: dict[str, int] = defaultdict(int)
    base = Path(tempfile.mkdtemp(prefix="lessons-"))
    if test is not None:
        splits = [(records, test)]
        out: dict[str, Any] = {"protocol": "learn/test", "learn_runs": len(records)}
        out["test_runs"] = len(test)
    else:
        groups = sorted({_group(r, n) for n, r in records})
        splits = []
        for f in range(folds):
            held = set(groups[f::folds])
            splits.append(
                (
                    [(n, r) for n, r in records if _group(r, n) not in held],
                    [(n, r) for n, r in records if _group(r, n) in held],
                )
            )
        out = {"protocol": f"{folds} folds by task", "runs": len(records), "tasks": len(groups)}
        if only is not None:
            out["protocol"] += f", folds {only} only"
    out["nights"] = nights
    designs = DESIGNS if not llm_url else None
    rows: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    cards: dict[str, list[dict[str, Any]]] = defaultdict(list)
    per_fold = []
    for f, (learn, held_out) in enumerate(splits):
        if only is not None and f not in only:
            continue
        work = base / f"fold{f}"
        got = evaluate(
            learn,
            held_out,
            embedder=embedder,
            work=work,
            llm_url=llm_url,
            cost=cost,
            nights=nights,
            designs=designs,
        )
        for name, design in got.items():
            for k in ("events", "writes", "served"):
                rows[name][k].extend(design[k])
            cards[name].append(design["cards"])
        first = next(iter(got.values()))
        per_fold.append({"fold": f, "cards": first["cards"], **summarise(first)})
    names = list(rows)
    out.update(summarise(rows[names[0]]))
    out["cards"] = _cards(cards[names[0]])
    if designs:
        out["designs"] = {
            n: {"gate": DESIGNS[n], **summarise(rows[n]), "cards": _cards(cards[n])} for n in names
        }
    out["per_fold"] = per_fold
    if llm_url:
        out["llm"] = {"server": "scripted (plumbing, not model quality)", **cost}
    return out


def _cards(per_fold: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "active_per_fold": [c["active_cards"] for c in per_fold],
        "share_with_a_successful_run": round(
            sum(c["with_a_successful_run"] for c in per_fold)
            / max(sum(c["active_cards"] for c in per_fold), 1),
            4,
        ),
    }


def _load(path: Path) -> list[tuple[str, dict[str, Any]]]:
    from memory_core.ingest.store import iter_sources

    return [(n, r) for n, r in iter_sources([str(path)]) if isinstance(r, dict)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path, nargs="?", help="runs for the folds (any ingest format)")
    ap.add_argument("--learn", type=Path, help="runs to learn from (with --test)")
    ap.add_argument("--test", type=Path, help="runs to replay (with --learn)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--only", type=int, nargs="+", help="run only these folds (0-based)")
    ap.add_argument(
        "--nights", type=int, default=3, help="learn the runs in this many nights, by task"
    )
    ap.add_argument("--llm", choices=("none", "scripted"), default="none")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if bool(args.learn) != bool(args.test) or bool(args.path) == bool(args.learn):
        ap.error("give one runs file for the folds, or both --learn and --test")
    if args.folds < 2:
        ap.error("--folds must be at least 2")
    args.out = args.out or RESULTS / (
        "lessons_llm.json" if args.llm == "scripted" else "lessons.json"
    )
    records = _load(args.learn or args.path)
    test = _load(args.test) if args.test else None
    t0 = time.perf_counter()
    if args.llm == "scripted":
        with scripted_server() as (url, requests):
            result = run(records, test, args.folds, llm_url=url, nights=args.nights, only=args.only)
            result["llm"]["requests"] = requests()
    else:
        result = run(records, test, args.folds, nights=args.nights, only=args.only)
    result["data"] = str(args.path or f"{args.learn} -> {args.test}")
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    report(result)


if __name__ == "__main__":
    main()
