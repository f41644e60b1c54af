"""Metrics for bench/lessons.py: ranking metrics, AUROC, the operating point, bootstrap."""

from __future__ import annotations

import random
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


def ranking_summary(lists: Sequence[list[bool]], *, ci: bool = True) -> dict[str, Any]:
    """precision@k, recall@k and MRR over events, from each event's relevance list."""
    n = len(lists)
    out: dict[str, Any] = {"events": n}
    if not n:
        return out

    def recall(k: int) -> Callable[[Sequence[list[bool]]], float]:
        return lambda ls: sum(any(r[:k]) for r in ls) / len(ls)

    for k in KS:
        out[f"p@{k}"] = round(sum(sum(r[:k]) / k for r in lists) / n, 4)
        out[f"r@{k}"] = round(recall(k)(lists), 4)
        if ci and k in (1, 3):
            out[f"r@{k}_ci"] = bootstrap(lists, recall(k))
    out["mrr"] = round(
        sum(next((1 / (i + 1) for i, x in enumerate(r) if x), 0.0) for r in lists) / n, 4
    )
    out["served"] = round(sum(len(r) for r in lists) / n, 2)
    return out


def auroc(pairs: Sequence[tuple[float, bool]]) -> float | None:
    """Area under the ROC curve of score for telling positives from negatives (ties count 1/2)."""
    pos = sorted(s for s, y in pairs if y)
    neg = sorted(s for s, y in pairs if not y)
    if not pos or not neg:
        return None
    # rank-sum with average ranks for ties
    allv = sorted((s, y) for s, y in pairs)
    ranks: dict[float, float] = {}
    i = 0
    while i < len(allv):
        j = i
        while j < len(allv) and allv[j][0] == allv[i][0]:
            j += 1
        ranks[allv[i][0]] = (i + j + 1) / 2  # 1-based average rank
        i = j
    rank_sum = sum(ranks[s] for s in pos)
    return (rank_sum - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def tpr_at_fpr(pairs: Sequence[tuple[float, bool]], *, max_fpr: float) -> tuple[float, float]:
    """The best share of positives warned (score >= a threshold > 0) with at most `max_fpr` of
    the negatives warned; returns (tpr, fpr) at that threshold."""
    pos = [s for s, y in pairs if y]
    neg = [s for s, y in pairs if not y]
    if not pos or not neg:
        return 0.0, 0.0
    best = (0.0, 0.0)
    for t in sorted({s for s, _ in pairs if s > 0}):
        fpr = sum(s >= t for s in neg) / len(neg)
        if fpr <= max_fpr:
            tpr = sum(s >= t for s in pos) / len(pos)
            if tpr > best[0]:
                best = (tpr, fpr)
    return round(best[0], 4), round(best[1], 4)


def score_summary(pairs: Sequence[tuple[float, bool]], *, max_fpr: float) -> dict[str, Any]:
    """AUROC with its interval, and the operating point at the noise cap."""
    a = auroc(pairs)
    tpr, fpr = tpr_at_fpr(pairs, max_fpr=max_fpr)
    return {
        "auroc": None if a is None else round(a, 4),
        "auroc_ci": bootstrap(pairs, auroc),
        f"wrong_warned_at_noise<={max_fpr}": tpr,
        "noise_at_that_point": fpr,
        "wrong_warned_ci": bootstrap(pairs, lambda p: tpr_at_fpr(p, max_fpr=max_fpr)[0]),
    }
