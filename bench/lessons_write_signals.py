"""Can a generic signal tell a wrong write from a right write of the same tool?

Feasibility for the wrong-writes metric of bench/lessons.py: on every run of a file, each
write the label of bench/lessons_writes.py keeps (`write_labels`: the first off-key effective
write of a failed run is positive, an effective write among the expected actions negative) is
scored by candidate signals computed from the run's steps BEFORE the call (messages, earlier
calls and their observations) and nothing else, so each is computable for any agent's data.
Each signal's direction is fixed beforehand (higher = more suspicious) and none has a
threshold fitted to the data. Two learned signals (bench/lessons_write_learned.py) score a
write from the other folds' runs (5 folds by task) by run outcome alone, as the memory
learns; the run's own outcome, known only afterwards, is the reference. Reported: the
within-tool AUROC (pairs of the same tool only, `within_tool_auroc`) with a 95% bootstrap
interval over tasks, per tool, and the counts.

    python bench/lessons_write_signals.py data/tau-bench-airline/trajectories.json

Writes bench/results/lessons_write_signals.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lessons_learn import task_of  # noqa: E402
from bench.lessons_metrics import by_task, within_tool_auroc  # noqa: E402
from bench.lessons_write_learned import ATTRIBUTES, ID_LIKE, learned_scores, leaves  # noqa: E402
from bench.lessons_writes import expected_actions, is_write, write_labels  # noqa: E402

# a short reply that assents: generic English, not any one agent's wording
_ASSENT = re.compile(
    r"^\W*(yes|yeah|yep|yup|sure|ok|okay|correct|confirm(ed)?|proceed|go ahead|please do|"
    r"that'?s (right|correct|fine)|sounds good)\b",
    re.I,
)
# the assistant saying it will not or cannot: generic English
_DECLINE = re.compile(
    r"\b(cannot|can't|can not|unable to|not able to|not allowed|not permitted|"
    r"not eligible|unfortunately)\b",
    re.I,
)


def _share_absent(values: list[str], text: str) -> float:
    """Share of values that never occur in text (0 when there is no value)."""
    if not values:
        return 0.0
    low = text.casefold()
    return sum(v.casefold() not in low for v in values) / len(values)


class Before:
    """What a run showed before one of its calls."""

    def __init__(self, steps: list[Any], i: int) -> None:
        prior = steps[:i]
        self.user = [s.text or "" for s in prior if s.type == "message" and s.role == "user"]
        self.assistant_idx = [
            j for j, s in enumerate(prior) if s.type == "message" and s.role == "assistant"
        ]
        self.calls = [s for s in prior if s.type == "tool_call" and s.tool]
        self.observed = " ".join(s.observation or "" for s in self.calls)
        self.read_args = " ".join(
            json.dumps(s.args or {}) for s in self.calls if not is_write(s.tool)
        )
        self.prior = prior


def sig_ungrounded(call: Any, b: Before) -> float:
    """Share of argument values seen in no earlier user message or tool observation."""
    return _share_absent(list(leaves(call.args)), " ".join(b.user) + " " + b.observed)


def sig_not_from_user(call: Any, b: Before) -> float:
    """Share of argument values the user never wrote."""
    return _share_absent(list(leaves(call.args)), " ".join(b.user))


def sig_ids_unread(call: Any, b: Before) -> float:
    """Share of identifier-like values neither returned by nor passed to an earlier read."""
    ids = [v for v in leaves(call.args) if ID_LIKE.match(v)]
    return _share_absent(ids, b.observed + " " + b.read_args)


def sig_ids_never_read(call: Any, b: Before) -> float:
    """Share of identifier-like values never passed to an earlier read (never looked up)."""
    return _share_absent([v for v in leaves(call.args) if ID_LIKE.match(v)], b.read_args)


def sig_no_assent(call: Any, b: Before) -> float:
    """1 unless the last user message before the call is a short assent."""
    return 0.0 if b.user and _ASSENT.match(b.user[-1]) else 1.0


def sig_no_user_since_read(call: Any, b: Before) -> float:
    """1 when no user message came after the last read call (or no read at all)."""
    last_read = max(
        (
            j
            for j, s in enumerate(b.prior)
            if s.type == "tool_call" and s.tool and not is_write(s.tool)
        ),
        default=None,
    )
    if last_read is None:
        return 1.0
    return float(not any(s.type == "message" and s.role == "user" for s in b.prior[last_read:]))


def sig_not_stated(call: Any, b: Before) -> float:
    """Share of argument values absent from the assistant's last message before the user's
    last one (the action as stated for confirmation)."""
    user_idx = [j for j, s in enumerate(b.prior) if s.type == "message" and s.role == "user"]
    stated = [j for j in b.assistant_idx if user_idx and j < user_idx[-1]]
    text = (b.prior[stated[-1]].text or "") if stated else ""
    return _share_absent(list(leaves(call.args)), text)


def sig_declined_before(call: Any, b: Before) -> float:
    """1 when an earlier assistant message declined (cannot, unable, not allowed...)."""
    return float(any(_DECLINE.search(b.prior[j].text or "") for j in b.assistant_idx))


def sig_repeated_tool(call: Any, b: Before) -> float:
    """1 when the same tool already took effect earlier in the run (with other arguments)."""
    return float(any(s.tool == call.tool and not s.error for s in b.calls))


def sig_prior_writes(call: Any, b: Before) -> float:
    """Effective writes earlier in the run."""
    return float(sum(is_write(s.tool) and not s.error for s in b.calls))


def sig_prior_errors(call: Any, b: Before) -> float:
    """Tool errors earlier in the run (the state's error_count)."""
    return float(sum(bool(s.error) for s in b.calls))


def sig_user_turns(call: Any, b: Before) -> float:
    """Fewer user turns before the write: less asked, less confirmed (negated count)."""
    return -float(len(b.user))


SIGNALS: dict[str, Callable[[Any, Before], float]] = {
    "ungrounded values": sig_ungrounded,
    "values the user never wrote": sig_not_from_user,
    "ids not from a read": sig_ids_unread,
    "ids never passed to a read": sig_ids_never_read,
    "no short assent just before": sig_no_assent,
    "no user turn since the last read": sig_no_user_since_read,
    "values not in the stated action": sig_not_stated,
    "the assistant declined earlier": sig_declined_before,
    "tool already took effect in the run": sig_repeated_tool,
    "earlier effective writes": sig_prior_writes,
    "earlier tool errors": sig_prior_errors,
    "fewer user turns": sig_user_turns,
}


def rows_of(records: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per labelled write: group, tool, label and every signal's score."""
    from memory_core.replay import parse_all

    parsed, _ = parse_all(records, namespace="signals", task_type="default")
    by_key = {t.key: r for (_, r), t in zip(records, parsed, strict=True)}
    rows: list[dict[str, Any]] = []
    learn: list[dict[str, Any]] = []
    for t in parsed:
        expected = expected_actions(by_key[t.key])
        if expected is None:
            continue
        steps = list(t.steps)
        idx = [i for i, s in enumerate(steps) if s.type == "tool_call" and s.tool]
        calls = [steps[i] for i in idx]
        labels = write_labels(calls, expected, t.outcome.value == "failure")
        group = task_of(by_key[t.key], t.key)
        for i, call, label in zip(idx, calls, labels, strict=True):
            if not is_write(call.tool or "") or call.error:
                continue
            before = Before(steps, i)
            # every effective write, labelled or not, is what the memory learns from
            attrs = {name: fn(call, before) for name, fn in ATTRIBUTES.items()}
            failed = int(t.outcome.value == "failure")
            learn.append({"group": group, "tool": call.tool, "_attrs": attrs, "_failed": failed})
            if label is None:
                continue
            row: dict[str, Any] = {
                "group": group,
                "tool": call.tool,
                "positive": label,
                "_attrs": attrs,
            }
            row[CEILING] = float(failed)
            row.update({name: fn(call, before) for name, fn in SIGNALS.items()})
            rows.append(row)
    learned_scores(rows, learn)
    return rows


CEILING = "run outcome (ceiling)"
BAR = 0.65  # the target; a signal passes when its interval also lies above 0.5


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per signal: within-tool AUROC, its interval over tasks, and per tool."""
    per_tool = Counter((r["tool"], r["positive"]) for r in rows)
    out: dict[str, Any] = {
        "writes": len(rows),
        "positives": sum(r["positive"] for r in rows),
        "tasks": len({r["group"] for r in rows}),
        "by_tool": {
            tool: {"positive": per_tool[(tool, True)], "negative": per_tool[(tool, False)]}
            for tool in sorted({r["tool"] for r in rows})
        },
        "signals": {},
    }
    names = {n: (fn.__doc__ or "").strip() for n, fn in SIGNALS.items()}
    names.update({f"learned: {n}": (fn.__doc__ or "").strip() for n, fn in ATTRIBUTES.items()})
    names[CEILING] = "1 when the write's own run failed: known only afterwards, a reference"
    for name, doc in names.items():

        def auroc(rs: list[dict[str, Any]], n: str = name) -> float | None:
            return within_tool_auroc(rs, n)

        value = auroc(rows)
        out["signals"][name] = {
            "within_tool_auroc": None if value is None else round(value, 4),
            "ci": by_task(rows, auroc),
            "per_tool": {
                tool: round(a, 4)
                for tool in out["by_tool"]
                if (a := auroc([r for r in rows if r["tool"] == tool])) is not None
            },
            "definition": doc,
        }
    out["passing"] = [
        n
        for n, s in out["signals"].items()
        if n != CEILING and (s["within_tool_auroc"] or 0) >= BAR and s["ci"] and s["ci"][0] > 0.5
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/lessons_write_signals.json")
    args = ap.parse_args()
    from bench.lessons import _load

    result = {"data": args.path.name, **summary(rows_of(_load(args.path)))}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, s in result["signals"].items():
        print(f"{name:40s} {s['within_tool_auroc']}  {s['ci']}")


if __name__ == "__main__":
    main()
