"""The plots of bench/poison.py: poison.png (the rule and the LLM path, screen on and off) and
poison_heldout.png (the held-out set: first measurement against the latest, defended)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

RATES = ("0.001", "0.01", "0.05")


def _bars(ax: Any, series: list[tuple[str, list[float]]], title: str) -> None:
    """Grouped bars: one group per poison rate, one bar per series."""
    rates = list(RATES)
    width = 0.8 / max(1, len(series))
    for j, (name, vals) in enumerate(series):
        bars = ax.bar([i + j * width for i in range(len(rates))], vals, width, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=6)
    mid = (len(series) - 1) * width / 2
    ax.set_xticks([i + mid for i in range(len(rates))], [f"{float(r):.1%}" for r in rates])
    ax.set_xlabel("poison rate")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)


def plot(result: dict[str, Any], out: Path) -> None:
    """Attack success by rate, defended vs undefended: the rule path (tau-bench and LoCoMo
    facts) and, when measured, the LLM path (both modes, and LoCoMo facts by the LLM)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = list(RATES)

    def vals(rows: dict[str, Any], cfg: str) -> list[float]:
        return [rows[r][cfg]["attack_success"] or 0.0 for r in rates]

    rules = [
        (f"{ds} {cfg}", vals(result[ds]["rates"], cfg))
        for ds in ("tau", "locomo")
        for cfg in ("undefended", "defended")
    ]
    llm = result.get("llm") or {}
    llm_series = [
        (f"tau {mode} {cfg}", vals(llm["tau"]["modes"][mode]["rates"], cfg))
        for mode in (llm.get("tau") or {}).get("modes", {})
        for cfg in ("undefended", "defended")
    ]
    if "locomo" in llm:
        llm_series += [
            (f"locomo {cfg}", vals(llm["locomo"]["rates"], cfg))
            for cfg in ("undefended", "defended")
        ]
    panels = 2 if llm_series else 1
    fig, axes = plt.subplots(1, panels, figsize=(8 * panels, 4.2), squeeze=False)
    _bars(axes[0][0], rules, "rule extractor and rule facts")
    axes[0][0].set_ylabel("attack success (share of trigger states)")
    if llm_series:
        _bars(axes[0][1], llm_series, "LLM extractor and LLM facts (obedient model)")
    fig.suptitle("Injected instructions served, screen on vs off")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_heldout(result: dict[str, Any], out: Path) -> None:
    """The held-out set, defended: attack success first measured (before the screen was
    changed for it) and now, per path and rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(got: dict[str, Any]) -> list[tuple[str, list[float]]]:
        out = [("rules", [got["tau"]["rates"][r]["defended"]["attack_success"] for r in RATES])]
        for mode, m in got["llm"]["tau"]["modes"].items():
            rows = m["rates"]
            out.append((f"LLM {mode}", [rows[r]["defended"]["attack_success"] for r in RATES]))
        return out

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), squeeze=False)
    _bars(axes[0][0], series(result["heldout_first"]), "first measurement (before tuning)")
    _bars(axes[0][1], series(result["heldout"]), "after the fixes (tuned against this set)")
    axes[0][0].set_ylabel("attack success, defended (share of trigger states)")
    for ax in axes[0]:
        ax.set_ylim(0, 0.5)
    fig.suptitle(f"Held-out attacks on tau-bench ({result['heldout']['variants']} variants)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
