"""The plot and the printed tables of bench/lessons.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.lessons_metrics import KS

RANKERS = ("hindsight", "tool's frequent errors", "dense snippets")
SCORERS = (
    "hindsight",
    "hindsight cautions",
    "tool failure rate",
    "dense kNN",
    "features failed elsewhere",
    "run outcome (ceiling)",
)
OPERATING = "wrong_warned_at_noise<=0.15"


def plot(result: dict[str, Any], out: Path) -> None:
    """Recurring errors (r@1, r@3), wrong-write AUROC and the operating point, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    proto = result["other_tasks"]
    width = 0.27
    for i, system in enumerate(RANKERS):
        row = proto.get(system, {})
        vals = [row.get("r@1", 0), row.get("r@3", 0)]
        err = [row.get(f"r@{k}_ci") or [v, v] for k, v in zip((1, 3), vals, strict=True)]
        lo = [v - e[0] for v, e in zip(vals, err, strict=True)]
        hi = [e[1] - v for v, e in zip(vals, err, strict=True)]
        bars = axes[0].bar(
            [x + i * width for x in range(2)], vals, width, yerr=[lo, hi], capsize=3, label=system
        )
        axes[0].bar_label(bars, fmt="%.2f", fontsize=7)
    axes[0].set_xticks([x + width for x in range(2)], ["r@1", "r@3"])
    axes[0].set_title(f"recurring errors, other tasks ({proto['hindsight'].get('events', 0)})")
    axes[0].set_ylim(0, 1.1)
    axes[0].legend(fontsize=7)
    ww = result["wrong_writes"]
    for ax, key, ci, title in (
        (axes[1], "auroc", "auroc_ci", "wrong writes: AUROC"),
        (axes[2], OPERATING, "wrong_warned_ci", "wrong writes warned at noise <= 15%"),
    ):
        vals = [ww.get(s, {}).get(key) or 0 for s in SCORERS]
        cis = [ww.get(s, {}).get(ci) or [v, v] for s, v in zip(SCORERS, vals, strict=True)]
        lo = [v - c[0] for v, c in zip(vals, cis, strict=True)]
        hi = [c[1] - v for v, c in zip(vals, cis, strict=True)]
        bars = ax.bar(range(len(SCORERS)), vals, yerr=[lo, hi], capsize=3)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
        ax.set_xticks(range(len(SCORERS)), SCORERS, fontsize=7, rotation=15)
        ax.set_ylim(0, 1.1)
        ax.set_title(f"{title} ({ww['wrong']}/{ww['writes']} wrong)", fontsize=9)
    axes[1].axhline(0.5, color="grey", lw=0.8, ls="--")
    fig.suptitle("Lessons that transfer to tasks the memory never saw (tau-bench airline, rules)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def report(result: dict[str, Any]) -> None:
    """Print the tables."""
    cols = ["events", *(f"r@{k}" for k in KS), "mrr", "served"]
    print(f"{'protocol':14}{'system':34}" + "".join(f"{c:>8}" for c in cols) + "   r@1 ci / r@3 ci")
    for proto in ("other_tasks", "later_trials"):
        for system, row in result[proto].items():
            if isinstance(row, dict):
                print(
                    f"{proto:14}{system:34}"
                    + "".join(f"{row.get(c, '-'):>8}" for c in cols)
                    + f"   {row.get('r@1_ci')} / {row.get('r@3_ci')}"
                )
    ww = result["wrong_writes"]
    print(f"\nwrong writes: {ww['wrong']} of {ww['writes']} write calls")
    for s in SCORERS:
        r = ww.get(s)
        if r is None:
            continue
        print(
            f"  {s:22} AUROC {r['auroc']} {r['auroc_ci']}   warned at noise<=0.15: "
            f"{r[OPERATING]} (noise {r['noise_at_that_point']}) {r['wrong_warned_ci']}"
        )
    for f in result["per_fold"]:
        line = "  ".join(
            f"{s} {f['wrong_writes'][s]['auroc']}" for s in SCORERS if s in f["wrong_writes"]
        )
        rec = f["recurring_errors"].get("hindsight", {})
        print(
            f"  fold {f['fold']}: writes {f['wrong_writes']['writes']} AUROC {line}; "
            f"errors {rec.get('events', 0)} r@1 {rec.get('r@1')} r@3 {rec.get('r@3')}; "
            f"cards {f['cards']['active_cards']}"
        )
    print(f"card usefulness: {result['card_usefulness']}")
    print(f"{result['wall_s']} s")
