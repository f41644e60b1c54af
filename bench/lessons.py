"""Lessons that carry over: are the errors of earlier runs warned about before they recur?

Built on `hindsight replay` (memory_core.replay). Runs are grouped by task (`task_id` of the
record when present, else each run is its own task). Two protocols:

* other tasks: the tasks are split into folds; for each fold, cards are learned from the
  runs of the other folds (ingest -> rule retrospect -> validate -> consolidate, the product's
  nightly stages with default settings), then the held-out runs are replayed;
* later trials: cards are learned from the first trial of every task, then the later trials
  are replayed.

An event is a tool call whose result was an error (the error text is the ground truth) with
an error signature that also occurred in the learning runs (for later trials: in the same
task's first trial; the "(any task)" rows take any task's first trial). The query is the
task state just before that call. A retrieved item is relevant when it warns about that
error: a card whose failure modes carry the signature
(memory_core.replay.card_warns), or, for the baseline, a snippet of a call that failed with
it. precision@k = relevant items in the top k / k; recall@k = share of events with a relevant
item in the top k; MRR = mean of 1 / rank of the first relevant item.

Baseline: dense retrieval (all-MiniLM-L6-v2) of raw trajectory snippets (one per tool call of
the learning runs: tool, arguments, result), queried with the same state rendered as text.

    python bench/lessons.py ../shared/data/tau-bench-airline/trajectories.json [--folds 5]

Writes bench/results/lessons.json and lessons.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
KS = (1, 3, 5)


def _group(record: dict[str, Any], key: str) -> str:
    task = record.get("task_id", record.get("metadata", {}).get("task_id"))
    return str(task) if task is not None else key


def _trial(record: dict[str, Any]) -> int:
    return int(record.get("trial", record.get("metadata", {}).get("trial", 0)) or 0)


def _learn(records: list[tuple[str, dict[str, Any]]], data_dir: Path) -> Any:
    from memory_core import db
    from memory_core.consolidate.stage import consolidate
    from memory_core.ingest.store import ingest
    from memory_core.retrospect.claims import worker_id
    from memory_core.retrospect.rule_extractor import RuleExtractor
    from memory_core.retrospect.stage import retrospect_once
    from memory_core.settings import Settings
    from memory_core.validate.stage import validate_drafts

    settings = Settings(data_dir=data_dir, embedder="none")
    db.upgrade(settings)
    engine = db.make_engine(settings)
    ingest(engine=engine, records=records, namespace="bench", task_type="default")
    while retrospect_once(
        engine=engine,
        extractor=RuleExtractor(),
        worker=worker_id(),
        batch_size=200,
        lease=timedelta(seconds=300),
    ).claimed:
        pass
    validate_drafts(engine=engine, reports_dir=None, review_below=settings.review_below)
    consolidate(engine=engine, namespace="bench", rules=settings.consolidate)
    return engine


def _snippet(step: Any) -> str:
    result = step.error or step.observation or ""
    return f"{step.tool} {json.dumps(step.args or {}, sort_keys=True)} -> {result[:300]}"


def _state_text(state: dict[str, Any], args: dict[str, Any]) -> str:
    text = f"{state['tool']} {json.dumps(args, sort_keys=True)}"
    if state.get("last_tool"):
        text += f" after {state['last_tool']}"
        if state.get("last_error"):
            text += f" failed: {state['last_error']}"
    return text


class Metrics:
    """precision@k, recall@k and MRR over events, from each event's relevance list."""

    def __init__(self) -> None:
        self.lists: list[list[bool]] = []

    def add(self, relevant: list[bool]) -> None:
        self.lists.append(relevant)

    def summary(self) -> dict[str, Any]:
        n = len(self.lists)
        out: dict[str, Any] = {"events": n}
        if not n:
            return out
        for k in KS:
            out[f"p@{k}"] = round(sum(sum(r[:k]) / k for r in self.lists) / n, 4)
            out[f"r@{k}"] = round(sum(any(r[:k]) for r in self.lists) / n, 4)
        out["mrr"] = round(
            sum(next((1 / (i + 1) for i, x in enumerate(r) if x), 0.0) for r in self.lists) / n, 4
        )
        out["served"] = round(sum(len(r) for r in self.lists) / n, 2)
        return out


def evaluate(
    learn: list[tuple[str, dict[str, Any]]],
    test: list[tuple[str, dict[str, Any]]],
    *,
    same_task: bool,
    embedder: Any,
    work: Path,
    into: dict[str, Metrics],
    noise: dict[str, int],
) -> None:
    """Learn from `learn`, replay `test`, add every eligible event's relevance lists."""
    import numpy as np

    from memory_core.models.columns import utcnow
    from memory_core.replay import parse_all, replay_trajectory, served_cards
    from memory_core.task_state import normalise_error, states_before_calls

    engine = _learn(learn, work)
    learned, _ = parse_all(learn, namespace="bench", task_type="default")
    tested, _ = parse_all(test, namespace="bench", task_type="default")
    group_of = {
        t.key: _group(r, t.key) for (_, r), t in zip(learn + test, learned + tested, strict=True)
    }
    # the learning runs' errors (by task, for the same-task protocol) and their snippets
    seen: dict[str, set[str]] = defaultdict(set)
    snippets: list[tuple[str, str]] = []  # (signature or "", text)
    for t in learned:
        for s in t.steps:
            if s.type == "tool_call" and s.tool:
                sig = normalise_error(s.error) if s.error else ""
                if sig:
                    seen[group_of[t.key]].add(sig)
                    seen["*"].add(sig)
                snippets.append((sig, _snippet(s)))
    vectors = np.asarray(embedder.embed([text for _, text in snippets]), dtype=np.float32)
    snapshot, cards = served_cards(engine=engine, namespace="bench")
    now = utcnow()
    for t in tested:
        rep = replay_trajectory(
            t, snapshot=snapshot, cards=cards, top_k=max(KS), now=now, pre_call_only=False
        )
        calls = [s for s in t.steps if s.type == "tool_call" and s.tool]
        states = states_before_calls(calls, task_type=t.task_type, agent_id=t.agent_id)
        for c, step, state in zip(rep.calls, calls, states, strict=True):
            if not c.signature:
                noise["calls_ok"] += 1
                noise["cards_served_ok"] += len(c.served)
                continue
            if c.signature not in seen["*"]:
                continue
            (q,) = embedder.embed([_state_text(state, step.args or {})])
            sims = vectors @ np.asarray(q, dtype=np.float32)
            top = np.argsort(-sims, kind="stable")[: max(KS)]
            scopes = [""]
            if same_task:  # the same task's first trial had it (else: another task's)
                scopes = [" (any task)"]
                if c.signature in seen[group_of[t.key]]:
                    scopes.append("")
            for scope in scopes:
                into.setdefault(f"hindsight{scope}", Metrics()).add([s.warned for s in c.served])
                into.setdefault(f"dense snippets{scope}", Metrics()).add(
                    [snippets[i][0] == c.signature for i in top]
                )


def run(path: Path, folds: int) -> dict[str, Any]:
    from memory_core.embed.local import LocalMiniLM
    from memory_core.ingest.store import iter_sources

    records = [(n, r) for n, r in iter_sources([str(path)]) if isinstance(r, dict)]
    groups = sorted({_group(r, n) for n, r in records})
    embedder = LocalMiniLM()
    out: dict[str, Any] = {"data": str(path), "runs": len(records), "tasks": len(groups)}
    base = Path(tempfile.mkdtemp(prefix="lessons-"))
    # other tasks: k folds over the tasks
    t0 = time.perf_counter()
    metrics: dict[str, Metrics] = {"hindsight": Metrics(), "dense snippets": Metrics()}
    noise: dict[str, int] = defaultdict(int)
    for f in range(folds):
        held = set(groups[f::folds])
        learn = [(n, r) for n, r in records if _group(r, n) not in held]
        test = [(n, r) for n, r in records if _group(r, n) in held]
        evaluate(
            learn,
            test,
            same_task=False,
            embedder=embedder,
            work=base / f"fold{f}",
            into=metrics,
            noise=noise,
        )
    out["other_tasks"] = {
        "folds": folds,
        **{k: m.summary() for k, m in metrics.items()},
        "cards_per_successful_call": round(noise["cards_served_ok"] / max(noise["calls_ok"], 1), 2),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    # later trials of the same task
    t0 = time.perf_counter()
    first = {g: min(_trial(r) for n, r in records if _group(r, n) == g) for g in groups}
    learn = [(n, r) for n, r in records if _trial(r) == first[_group(r, n)]]
    test = [(n, r) for n, r in records if _trial(r) != first[_group(r, n)]]
    metrics = {"hindsight": Metrics(), "dense snippets": Metrics()}
    noise = defaultdict(int)
    evaluate(
        learn, test, same_task=True, embedder=embedder, work=base / "trials", into=metrics,
        noise=noise,
    )  # fmt: skip
    out["later_trials"] = {
        **{k: m.summary() for k, m in metrics.items()},
        "cards_per_successful_call": round(noise["cards_served_ok"] / max(noise["calls_ok"], 1), 2),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return out


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    metrics = [f"r@{k}" for k in KS] + [f"p@{k}" for k in KS] + ["mrr"]
    for ax, proto, title in zip(
        axes, ("other_tasks", "later_trials"), ("other tasks", "later trials"), strict=True
    ):
        width = 0.4
        for i, system in enumerate(("hindsight", "dense snippets")):
            row = result[proto][system]
            vals = [row.get(m, 0) for m in metrics]
            bars = ax.bar([x + i * width for x in range(len(metrics))], vals, width, label=system)
            ax.bar_label(bars, fmt="%.2f", fontsize=6)
        ax.set_xticks([x + width / 2 for x in range(len(metrics))], metrics, fontsize=8)
        ax.set_title(f"{title} ({result[proto]['hindsight'].get('events', 0)} error events)")
        ax.set_ylim(0, 1.05)
    axes[0].set_ylabel("score")
    axes[0].legend(fontsize=8)
    fig.suptitle("Warned before a known error recurs (tau-bench airline)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path, help="trajectory file or folder (any ingest format)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=RESULTS / "lessons.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = run(args.path, args.folds)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    cols = ["events", *(f"p@{k}" for k in KS), *(f"r@{k}" for k in KS), "mrr", "served"]
    print(f"{'protocol':14}{'system':28}" + "".join(f"{c:>8}" for c in cols))
    for proto in ("other_tasks", "later_trials"):
        for system, row in result[proto].items():
            if isinstance(row, dict):
                print(f"{proto:14}{system:28}" + "".join(f"{row.get(c, '-'):>8}" for c in cols))
    print(f"{result['wall_s']} s")


if __name__ == "__main__":
    main()
