"""The plot and the printed summary of bench/lessons.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

RANKERS = ("hindsight", "tool_frequency", "dense_snippets")
SCORERS = ("hindsight", "dense kNN", "features failed elsewhere", "run outcome (ceiling)")


def _bars(ax: Any, labels: list[str], vals: list[float], cis: list[Any], title: str) -> None:
    cis = [c or [v, v] for c, v in zip(cis, vals, strict=True)]
    lo = [max(v - c[0], 0) for v, c in zip(vals, cis, strict=True)]
    hi = [max(c[1] - v, 0) for v, c in zip(vals, cis, strict=True)]
    bars = ax.bar(range(len(vals)), vals, yerr=[lo, hi], capsize=3)
    ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(range(len(vals)), labels, fontsize=7, rotation=15)
    ax.set_ylim(0, 1.1)
    ax.set_title(title, fontsize=9)


def plot(result: dict[str, Any], out: Path) -> None:
    """Recurring r@1, within-tool AUROC, served precision and noise, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    rec = result["recurring"]
    _bars(
        axes[0],
        list(RANKERS),
        [rec[s].get("r1", 0) for s in RANKERS],
        [rec[s].get("r1_ci") for s in RANKERS],
        f"recurring errors r@1 ({rec['events']} events)",
    )
    w = result["writes"]
    _bars(
        axes[1],
        list(SCORERS),
        [w[s]["within_tool_auroc"] or 0 for s in SCORERS],
        [w[s]["within_tool_auroc_ci"] for s in SCORERS],
        f"first wrong write, AUROC within a tool ({w['positives']}+/{w['negatives']}-)",
    )
    axes[1].axhline(0.5, color="grey", lw=0.8, ls="--")
    s = result["served"]
    _bars(
        axes[2],
        ["precision", "noise"],
        [s["precision"] or 0, s["noise"] or 0],
        [s["precision_ci"], s["noise_ci"]],
        f"served lessons, scope call ({s['warnings']} at {s['calls']} calls)",
    )
    fig.suptitle(f"Lessons on tasks the memory never saw ({result['protocol']})")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def report(result: dict[str, Any]) -> None:
    """Print the summary."""
    rec = result["recurring"]
    print(f"recurring errors: {rec['events']} events")
    for system in RANKERS:
        r = rec[system]
        print(f"  {system:16} r@1 {r.get('r1')} {r.get('r1_ci')}", end="")
        print(f"  r@3 {r.get('r3')} {r.get('r3_ci')}")
    d = rec["r1_difference_vs_tool_frequency"]
    print(f"  r@1 hindsight - tool_frequency: {d['value']} {d['ci']}")
    w = result["writes"]
    print(f"first wrong writes: {w['positives']} positives, {w['negatives']} negatives")
    for s in SCORERS:
        a, ci = w[s]["within_tool_auroc"], w[s]["within_tool_auroc_ci"]
        print(f"  {s:28} within-tool AUROC {a} {ci}")
    for name, s in (
        ("served lessons", result["served"]),
        ("  tool reminders", result["served"]["tool_reminders"]),
        ("  all warnings", result["served"]["all_warnings"]),
    ):
        print(
            f"{name}: {s['warnings']} warnings; precision {s['precision']} "
            f"{s['precision_ci']}; noise {s['noise']} {s['noise_ci']}"
        )
    for f in result["per_fold"]:
        print(
            f"  fold {f['fold']}: events {f['recurring']['events']} "
            f"r@1 {f['recurring']['hindsight'].get('r1')}; "
            f"AUROC {f['writes']['within_tool_auroc']}; precision {f['served']['precision']} "
            f"noise {f['served']['noise']}; cards {f['cards']['active_cards']} "
            f"{f['cards']['by_pattern']}"
        )
    print(f"{result['wall_s']} s")
