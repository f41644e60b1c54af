"""Metrics for bench/lessons.py: ranking metrics, AUROC within a tool, and intervals by task.

Every interval is a 95% percentile bootstrap over task groups: a resample draws tasks with
replacement and keeps every row of each drawn task, so the trials of one task move together.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

KS = (1, 3, 5)
BOOTSTRAP = 1000
T = TypeVar("T")


def bootstrap(
    items: Sequence[T], stat: Callable[[Sequence[T]], float | None], *, n: int = BOOTSTRAP
) -> list[float] | None:
    """A 95% percentile interval of `stat` over resamples of `items` (seeded, reproducible)."""
    if not items:
        return None
    rng = random.Random(0)
    vals = []
    for _ in range(n):
        v = stat([items[rng.randrange(len(items))] for _ in items])
        if v is not None:
            vals.append(v)
    if not vals:
        return None
    vals.sort()
    return [round(vals[int(0.025 * len(vals))], 4), round(vals[int(0.975 * len(vals)) - 1], 4)]


def by_task(
    rows: Sequence[dict[str, Any]], stat: Callable[[list[dict[str, Any]]], float | None]
) -> list[float] | None:
    """The 95% interval of `stat` over resamples of the rows' task groups (`row["group"]`)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["group"]].append(r)
    blocks = list(groups.values())
    return bootstrap(blocks, lambda bs: stat([r for b in bs for r in b]))


def recall_at(lists: Sequence[list[bool]], k: int) -> float | None:
    """Share of events with a relevant item in the top k."""
    return sum(any(r[:k]) for r in lists) / len(lists) if lists else None


def ranking_summary(events: Sequence[dict[str, Any]], system: str) -> dict[str, Any]:
    """r@k, p@k and MRR of one system over events (each `row[system]` a relevance list)."""
    lists = [e[system] for e in events]
    n = len(lists)
    out: dict[str, Any] = {"events": n}
    if not n:
        return out
    for k in KS:
        out[f"p{k}"] = round(sum(sum(r[:k]) / k for r in lists) / n, 4)
        out[f"r{k}"] = round(recall_at(lists, k) or 0.0, 4)
        if k in (1, 3):
            out[f"r{k}_ci"] = by_task(events, lambda es, k=k: recall_at([e[system] for e in es], k))
    out["mrr"] = round(
        sum(next((1 / (i + 1) for i, x in enumerate(r) if x), 0.0) for r in lists) / n, 4
    )
    out["served"] = round(sum(len(r) for r in lists) / n, 2)
    return out


def r1_difference(events: Sequence[dict[str, Any]], a: str, b: str) -> dict[str, Any]:
    """r@1 of system a minus system b on the same events, paired, with its interval by task."""

    def diff(es: Sequence[dict[str, Any]]) -> float | None:
        if not es:
            return None
        return (recall_at([e[a] for e in es], 1) or 0.0) - (recall_at([e[b] for e in es], 1) or 0.0)

    value = diff(events)
    return {"value": None if value is None else round(value, 4), "ci": by_task(events, diff)}


def auroc(pairs: Sequence[tuple[float, bool]]) -> float | None:
    """Area under the ROC curve of score for telling positives from negatives (ties count 1/2)."""
    won, total = _pair_counts(pairs)
    return won / total if total else None


def _pair_counts(pairs: Sequence[tuple[float, bool]]) -> tuple[float, int]:
    pos = sorted(s for s, y in pairs if y)
    neg = sorted(s for s, y in pairs if not y)
    won = 0.0
    for p in pos:  # small sets: a direct count reads plainer than a rank sum
        won += sum(1.0 if p > n else 0.5 if p == n else 0.0 for n in neg)
    return won, len(pos) * len(neg)


def within_tool_auroc(rows: Sequence[dict[str, Any]], score: str) -> float | None:
    """AUROC over (positive, negative) pairs of the same tool only, pooled over tools."""
    per_tool: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for r in rows:
        per_tool[r["tool"]].append((r[score], r["positive"]))
    won, total = 0.0, 0
    for pairs in per_tool.values():
        w, t = _pair_counts(pairs)
        won, total = won + w, total + t
    return won / total if total else None


def ratio(rows: Sequence[dict[str, Any]], num: str, den: str) -> float | None:
    """sum(num) / sum(den) over rows, None when the denominator is 0."""
    d = sum(r[den] for r in rows)
    return sum(r[num] for r in rows) / d if d else None
