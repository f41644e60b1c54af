"""Does the state of the object a write names tell a wrong write from a right one?

A study for the wrong-writes metric of bench/lessons.py (labels of bench/lessons_writes.py:
the first off-key effective write of a failed run is positive, an effective write among the
expected actions negative; AUROC over pairs of the same tool only). Each effective write is
described by the state of the objects it names, as the agent read them before the call
(bench/lessons_state_atoms.py), as atoms and every pair of them. Learned per tool on the
learning folds only, with the product's breadth rule (a feature counts when it was seen on its
side in >= 2 task groups), by one of three supervisions:
* labels: the metric's own labels (an analysis: the memory never sees expected actions);
* contrast: what a nightly retrospect can know: a failed run's first effective write that no
  successful run of the same task made is suspect, the writes of successful runs are not;
* outcome: every effective write, suspect when its run failed (as bench/lessons_write_learned).
Scored by two scorers: `rule` (a card per feature: the largest p / (p + n + 1) among the
suspect features the write has, what a caution card's confidence would serve) and `bayes`
(the sum of smoothed log odds of every qualifying feature it has, either side). The first two
VARIANTS were fixed before any test fold was scored; the last two were added after, to see
whether pairs or repeated runs of one task caused the failure. Reported: within-tool AUROC
with 95% bootstrap intervals over tasks on 5 folds by task and on dev (learn and test on the
same runs), and, in sample, the single atoms that separate each tool's writes best.

    python bench/lessons_write_state.py data/tau-bench-airline/trajectories.json

Writes bench/results/lessons_write_state.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lessons_learn import task_of  # noqa: E402
from bench.lessons_metrics import by_task, within_tool_auroc  # noqa: E402
from bench.lessons_state_atoms import features, write_state  # noqa: E402
from bench.lessons_writes import canon, expected_actions, is_write, write_labels  # noqa: E402

FOLDS = 5
MIN_GROUPS = 2  # the product's breadth rule for keys
BAR = 0.65
SUPERVISIONS = ("labels", "contrast", "outcome")
SCORERS = ("rule", "bayes")


def collect(
    records: list[tuple[str, dict[str, Any]]], ids: bool = True, pairs: bool = True
) -> list[dict[str, Any]]:
    """One row per effective write: group, run, tool, labels (None when unlabelled), features."""
    from memory_core.replay import parse_all

    parsed, _ = parse_all(records, namespace="state", task_type="default")
    by_key = {t.key: r for (_, r), t in zip(records, parsed, strict=True)}
    rows: list[dict[str, Any]] = []
    for t in parsed:
        expected = expected_actions(by_key[t.key])
        calls = [s for s in t.steps if s.type == "tool_call" and s.tool]
        failed = t.outcome.value == "failure"
        labels = write_labels(calls, expected or set(), failed)
        first = True
        for i, (call, label) in enumerate(zip(calls, labels, strict=True)):
            if not is_write(call.tool or "") or call.error:
                continue
            rows.append(
                {
                    "group": task_of(by_key[t.key], t.key),
                    "run": t.key,
                    "tool": call.tool,
                    "failed": failed,
                    "first": first,
                    "canon": canon(call.tool or "", call.args),
                    "positive": label if expected is not None else None,
                    "_features": features(write_state(call, calls[:i], ids), pairs),
                }
            )
            first = False
    return rows


def supervised(rows: list[dict[str, Any]], how: str) -> list[tuple[dict[str, Any], bool]]:
    """(row, suspect) pairs to learn from, by one supervision."""
    if how == "labels":
        return [(r, r["positive"]) for r in rows if r["positive"] is not None]
    if how == "outcome":
        return [(r, r["failed"]) for r in rows]
    made = defaultdict(set)
    for r in rows:
        if not r["failed"]:
            made[r["group"]].add(r["canon"])
    out = []
    for r in rows:
        if not r["failed"]:
            out.append((r, False))
        elif r["first"] and r["canon"] not in made[r["group"]]:
            out.append((r, True))
    return out


class Learned:
    """Per tool and feature: suspect and clear counts and the task groups of each side."""

    def __init__(self, pairs: list[tuple[dict[str, Any], bool]], by_groups: bool = False) -> None:
        self.count: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        self.groups: dict[tuple[str, str], list[set[str]]] = defaultdict(lambda: [set(), set()])
        self.base: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for r, suspect in pairs:
            self.base[r["tool"]][suspect] += 1
            for f in r["_features"]:
                self.count[(r["tool"], f)][suspect] += 1
                self.groups[(r["tool"], f)][suspect].add(r["group"])
        if by_groups:  # each task group counts once per side, however many runs it has
            for key, (cleared, suspected) in self.groups.items():
                self.count[key] = [len(cleared), len(suspected)]

    def rule(self, tool: str, feats: set[str]) -> float:
        """The largest p / (p + n + 1) among the write's features suspect in >= 2 groups."""
        best = 0.0
        for f in feats:
            if len(self.groups.get((tool, f), [set(), set()])[1]) >= MIN_GROUPS:
                n, p = self.count[(tool, f)]
                best = max(best, p / (p + n + 1))
        return best

    def bayes(self, tool: str, feats: set[str]) -> float:
        """Sum of smoothed log odds of the write's features seen on a side in >= 2 groups."""
        n0, p0 = self.base.get(tool, [0, 0])
        prior = math.log((p0 + 1) / (n0 + 1))
        total = 0.0
        for f in feats:
            g = self.groups.get((tool, f))
            if g and max(len(g[0]), len(g[1])) >= MIN_GROUPS:
                n, p = self.count[(tool, f)]
                total += math.log((p + 1) / (n + 1)) - prior
        return total


def score(
    rows: list[dict[str, Any]], folds: int | None, by_groups: bool = False
) -> list[dict[str, Any]]:
    """Labelled rows scored by every supervision and scorer: by fold (None: in sample)."""
    groups = sorted({r["group"] for r in rows}, key=str)
    fold = {g: (i % folds if folds else 0) for i, g in enumerate(groups)}
    out: list[dict[str, Any]] = []
    for k in range(folds or 1):
        learn = [r for r in rows if folds is None or fold[r["group"]] != k]
        test = [r for r in rows if r["positive"] is not None and fold[r["group"]] == k]
        tested = [{key: r[key] for key in ("group", "tool", "positive")} for r in test]
        for how in SUPERVISIONS:
            model = Learned(supervised(learn, how), by_groups)
            for r, t in zip(test, tested, strict=True):
                t[f"{how} rule"] = model.rule(r["tool"], r["_features"])
                t[f"{how} bayes"] = model.bayes(r["tool"], r["_features"])
        out += tested
    return out


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per system: within-tool AUROC, its interval over tasks and per tool."""
    tools = sorted({r["tool"] for r in rows})
    out: dict[str, Any] = {}
    for how in SUPERVISIONS:
        for s in SCORERS:
            name = f"{how} {s}"

            def auroc(rs: list[dict[str, Any]], n: str = name) -> float | None:
                return within_tool_auroc(rs, n)

            value = auroc(rows)
            out[name] = {
                "within_tool_auroc": None if value is None else round(value, 4),
                "ci": by_task(rows, auroc),
                "per_tool": {
                    t: round(a, 4)
                    for t in tools
                    if (a := auroc([r for r in rows if r["tool"] == t])) is not None
                },
            }
    return out


def single_atoms(rows: list[dict[str, Any]], n: int = 6) -> dict[str, list[Any]]:
    """In sample, per tool with positives and negatives in >= 2 task groups each: the single
    atoms that separate them best (AUROC of the atom's presence, and its groups per side)."""
    out: dict[str, list[Any]] = {}
    for tool in sorted({r["tool"] for r in rows}):
        rs = [r for r in rows if r["tool"] == tool]
        if min(len({r["group"] for r in rs if r["positive"] == y}) for y in (True, False)) < 2:
            continue
        found = []
        for f in set().union(*(r["_features"] for r in rs)) - {""}:
            if " & " in f:
                continue
            a = within_tool_auroc([{**r, "x": float(f in r["_features"])} for r in rs], "x") or 0.5
            groups = [
                len({r["group"] for r in rs if r["positive"] == y and f in r["_features"]})
                for y in (True, False)
            ]
            found.append({"atom": f, "auroc": round(a, 4), "groups_pos_neg": groups})
        out[tool] = sorted(found, key=lambda x: (-abs(x["auroc"] - 0.5), x["atom"]))[:n]
    return out


def null_rule(rows: list[dict[str, Any]], n: int = 8) -> dict[str, Any]:
    """The label-learned rule on the folds with each tool's labels shuffled between its task
    groups (a group keeps its runs' labels together): what the held-out folds give by
    themselves when the state says nothing about the label."""
    import random

    rng = random.Random(1)
    values = []
    for _ in range(n):
        blocks: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            blocks[(r["tool"], r["group"])].append(dict(r))
        per_tool: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
        shuffled: list[dict[str, Any]] = []
        for (tool, _g), rs in blocks.items():
            shuffled += rs
            if any(r["positive"] is not None for r in rs):
                per_tool[tool].append([r for r in rs if r["positive"] is not None])
        for groups in per_tool.values():
            labels = [[r["positive"] for r in rs] for rs in groups]
            rng.shuffle(labels)
            for rs, ls in zip(groups, labels, strict=True):
                for i, r in enumerate(rs):
                    r["positive"] = ls[i % len(ls)]
        v = within_tool_auroc(
            [r for r in score(shuffled, FOLDS) if r["positive"] is not None], "labels rule"
        )
        values.append(round(v or 0.5, 4))
    return {"shuffles": n, "median": sorted(values)[n // 2], "values": values}


# (atom options, counting); the first two fixed before any fold was scored, the last two after
VARIANTS: dict[str, tuple[dict[str, bool], bool]] = {
    "atoms and pairs": ({}, False),
    "atoms and pairs, without id shapes": ({"ids": False}, False),
    "single atoms (after the folds)": ({"pairs": False}, False),
    "atoms and pairs counted by task group (after the folds)": ({}, True),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/lessons_write_state.json")
    args = ap.parse_args()
    from bench.lessons import _load

    records = _load(args.path)
    rows = collect(records)
    labelled = [r for r in rows if r["positive"] is not None]
    result: dict[str, Any] = {
        "data": args.path.name,
        "effective_writes": len(rows),
        "labelled_writes": len(labelled),
        "positives": sum(r["positive"] for r in labelled),
        "tasks": len({r["group"] for r in labelled}),
        "with_state": sum(bool(r["_features"]) for r in labelled),
        "bar": f">= {BAR} with the interval's lower end > 0.5, on the 5 folds",
        "variants": {},
        "passing": [],
        "single_atoms_in_sample": single_atoms(labelled),
    }
    result["null_labels_rule_folds"] = null_rule(rows)
    print(
        "null (labels shuffled between tasks), labels rule, folds:",
        result["null_labels_rule_folds"],
    )
    for variant, (options, by_groups) in VARIANTS.items():
        vrows = collect(records, **options) if options else rows
        part = {
            "folds": report(score(vrows, FOLDS, by_groups)),
            "dev": report(score(vrows, None, by_groups)),
        }
        result["variants"][variant] = part
        result["passing"] += [
            f"{variant}: {n}"
            for n, s in part["folds"].items()
            if (s["within_tool_auroc"] or 0) >= BAR and s["ci"] and s["ci"][0] > 0.5
        ]
        for split, systems in part.items():
            for name, s in systems.items():
                print(
                    f"{variant[:24]:24s} {split:5s} {name:16s} {s['within_tool_auroc']}  {s['ci']}"
                )
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print("passing:", result["passing"])


if __name__ == "__main__":
    main()
