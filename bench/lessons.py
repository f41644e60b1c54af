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

Baselines: dense retrieval (all-MiniLM-L6-v2) of raw trajectory snippets (one per tool call of
the learning runs: tool, arguments, result), queried with the same state rendered as text; and
the trivial list, the tool's most frequent errors in the learning runs, most frequent first.

Wrong writes (bench/lessons_writes.py) and card usefulness are scored on the other-tasks folds.
The memory never sees a record's `info` (where the expected actions live): it is dropped from
every record before learning and read only to score.

    python bench/lessons.py data/tau-bench-airline/trajectories.json [--folds 5]
        [--llm scripted]

Writes bench/results/lessons.json and lessons.png. With `--llm scripted` the learning runs
the rules and then the LLM path (per-run prompts and the contrast prompt) against the
scripted OpenAI-compatible server of the tests (tests/helpers/fake_model.py and
fake_contrast.py, which restate what the rules find): it measures the LLM path's plumbing
and cost (calls, tokens, what its grounding lets through), not what a real model would
learn. Writes bench/results/lessons_llm.json and lessons_llm.png.
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
MAX_NOISE = 0.15
SYSTEMS = (
    "hindsight",
    "hindsight cautions",
    "tool failure rate",
    "dense kNN",
    "features failed elsewhere",
    "repeat write",
    "write after an error",
    "run outcome (ceiling)",
)

from bench.lessons_learn import _learn, _snippet, _state_text, scripted_server  # noqa: E402
from bench.lessons_metrics import KS, ranking_summary, score_summary  # noqa: E402
from bench.lessons_plot import plot, report  # noqa: E402
from bench.lessons_writes import Baselines, card_usefulness, score_writes  # noqa: E402


def _group(record: dict[str, Any], key: str) -> str:
    task = record.get("task_id", record.get("metadata", {}).get("task_id"))
    return str(task) if task is not None else key


def _trial(record: dict[str, Any]) -> int:
    return int(record.get("trial", record.get("metadata", {}).get("trial", 0)) or 0)


class Metrics:
    """Relevance lists of the events, summarised by bench.lessons_metrics.ranking_summary."""

    def __init__(self) -> None:
        self.lists: list[list[bool]] = []

    def add(self, relevant: list[bool]) -> None:
        self.lists.append(relevant)

    def summary(self) -> dict[str, Any]:
        return ranking_summary(self.lists)


def evaluate(
    learn: list[tuple[str, dict[str, Any]]],
    test: list[tuple[str, dict[str, Any]]],
    *,
    same_task: bool,
    embedder: Any,
    work: Path,
    into: dict[str, Metrics],
    noise: dict[str, int],
    llm_url: str | None = None,
    cost: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Learn from `learn`, replay `test`, add every eligible event's relevance lists; the
    wrong-write rows and the cards' usefulness come back."""
    import numpy as np

    from memory_core.models.columns import utcnow
    from memory_core.replay import parse_all, replay_trajectory, served_cards
    from memory_core.task_state import error_signature, states_before_calls

    engine = _learn(learn, work, llm_url=llm_url, cost=cost)
    learned, _ = parse_all(learn, namespace="bench", task_type="default")
    tested, _ = parse_all(test, namespace="bench", task_type="default")
    group_of = {
        t.key: _group(r, t.key) for (_, r), t in zip(learn + test, learned + tested, strict=True)
    }
    # the learning runs' errors (by task, for the same-task protocol), their snippets, and
    # each tool's errors by frequency (the trivial baseline)
    seen: dict[str, set[str]] = defaultdict(set)
    snippets: list[tuple[str, str]] = []  # (signature or "", text)
    tool_errors: dict[str, Counter[str]] = defaultdict(Counter)
    for t in learned:
        for s in t.steps:
            if s.type == "tool_call" and s.tool:
                sig = error_signature(s.error, s.args) if s.error else ""
                if sig:
                    seen[group_of[t.key]].add(sig)
                    seen["*"].add(sig)
                    tool_errors[s.tool][sig] += 1
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
                noise["calls_ok_served"] += bool(c.served)
                continue
            if c.signature not in seen["*"]:
                continue
            (q,) = embedder.embed([_state_text(state, step.args or {})])
            sims = vectors @ np.asarray(q, dtype=np.float32)
            top = np.argsort(-sims, kind="stable")[: max(KS)]
            frequent = [sig for sig, _ in tool_errors[c.tool].most_common(max(KS))]
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
                into.setdefault(f"tool's frequent errors{scope}", Metrics()).add(
                    [sig == c.signature for sig in frequent]
                )
    if same_task:
        return {}
    records = dict(test)
    by_key = {t.key: records[name] for (name, _), t in zip(test, tested, strict=True)}
    writes = score_writes(
        tested,
        by_key,
        snapshot=snapshot,
        cards=cards,
        baselines=Baselines(learned, embedder, group_of),
        now=now,
        groups=group_of,
    )
    return {"writes": writes, "cards": card_usefulness(engine, "bench")}


def _noise(noise: dict[str, int]) -> dict[str, Any]:
    ok = max(noise["calls_ok"], 1)
    return {
        "cards_per_successful_call": round(noise["cards_served_ok"] / ok, 2),
        "replay_noise_rate": round(noise["calls_ok_served"] / ok, 4),
    }


def _writes_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "writes": len(rows),
        "wrong": sum(r["wrong"] for r in rows),
    }
    for system in SYSTEMS:
        out[system] = score_summary([(r[system], r["wrong"]) for r in rows], max_fpr=MAX_NOISE)
    return out


def _ranking_rows(metrics: dict[str, Metrics]) -> dict[str, Any]:
    return {k: m.summary() for k, m in metrics.items()}


def run(path: Path, folds: int, llm_url: str | None = None) -> dict[str, Any]:
    from memory_core.embed.factory import build_embedder
    from memory_core.ingest.store import iter_sources
    from memory_core.settings import Settings

    records = [(n, r) for n, r in iter_sources([str(path)]) if isinstance(r, dict)]
    groups = sorted({_group(r, n) for n, r in records})
    embedder = build_embedder(
        Settings(embedding={"provider": "local"})
    )  # the default install's model
    out: dict[str, Any] = {"data": str(path), "runs": len(records), "tasks": len(groups)}
    cost: dict[str, int] = defaultdict(int)  # the LLM path's, on every learning run
    base = Path(tempfile.mkdtemp(prefix="lessons-"))
    # other tasks: k folds over the tasks
    t0 = time.perf_counter()
    total: dict[str, Metrics] = {}
    noise_total: dict[str, int] = defaultdict(int)
    all_writes: list[dict[str, Any]] = []
    per_fold = []
    for f in range(folds):
        held = set(groups[f::folds])
        learn = [(n, r) for n, r in records if _group(r, n) not in held]
        test = [(n, r) for n, r in records if _group(r, n) in held]
        metrics: dict[str, Metrics] = {}
        noise: dict[str, int] = defaultdict(int)
        extra = evaluate(
            learn,
            test,
            same_task=False,
            embedder=embedder,
            work=base / f"fold{f}",
            into=metrics,
            noise=noise,
            llm_url=llm_url,
            cost=cost,
        )
        for k, m in metrics.items():
            total.setdefault(k, Metrics()).lists.extend(m.lists)
        for k, v in noise.items():
            noise_total[k] += v
        all_writes.extend(extra["writes"])
        per_fold.append(
            {
                "fold": f,
                "held_out_tasks": len(held),
                "recurring_errors": _ranking_rows(metrics),
                "wrong_writes": _writes_summary(extra["writes"]),
                "cards": extra["cards"],
                **_noise(noise),
            }
        )
    cards = [p["cards"] for p in per_fold]
    out["other_tasks"] = {
        "folds": folds,
        **_ranking_rows(total),
        **_noise(noise_total),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    out["wrong_writes"] = _writes_summary(all_writes)
    out["card_usefulness"] = {
        "active_cards_per_fold": [c["active_cards"] for c in cards],
        "share_with_a_successful_run": round(
            sum(c["with_a_successful_run"] for c in cards)
            / max(sum(c["active_cards"] for c in cards), 1),
            4,
        ),
        "replay_noise_rate": out["other_tasks"]["replay_noise_rate"],
    }
    out["per_fold"] = per_fold
    # later trials of the same task
    t0 = time.perf_counter()
    first = {g: min(_trial(r) for n, r in records if _group(r, n) == g) for g in groups}
    learn = [(n, r) for n, r in records if _trial(r) == first[_group(r, n)]]
    test = [(n, r) for n, r in records if _trial(r) != first[_group(r, n)]]
    metrics = {}
    noise = defaultdict(int)
    evaluate(
        learn, test, same_task=True, embedder=embedder, work=base / "trials", into=metrics,
        noise=noise, llm_url=llm_url, cost=cost,
    )  # fmt: skip
    out["later_trials"] = {
        **_ranking_rows(metrics),
        **_noise(noise),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    if llm_url:
        out["llm"] = {"server": "scripted (plumbing, not model quality)", **cost}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path, help="trajectory file or folder (any ingest format)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--llm", choices=("none", "scripted"), default="none")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    args.out = args.out or RESULTS / (
        "lessons_llm.json" if args.llm == "scripted" else "lessons.json"
    )
    t0 = time.perf_counter()
    if args.llm == "scripted":
        with scripted_server() as (url, requests):
            result = run(args.path, args.folds, llm_url=url)
            result["llm"]["requests"] = requests()
    else:
        result = run(args.path, args.folds)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    report(result)


if __name__ == "__main__":
    main()
