"""`hindsight effects report`: what the holdout measured."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, print_json, table

if TYPE_CHECKING:
    from memory_core.effects.estimate import Effect

app = typer.Typer(help="Does a card help? Served against withheld.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


def effect_cell(e: Effect | None) -> str:
    """One card's effect in a few characters: verdict, difference, uses per arm."""
    if e is None or e.difference is None:
        return "-"
    cell = (
        f"{e.label} {e.difference:+.2f} [{e.low:+.2f}, {e.high:+.2f}] "
        f"n={e.served_uses}/{e.withheld_uses}"
    )
    return cell + harms_cell(e)


def harms_cell(e: Effect) -> str:
    """The harms test within the namespace: p, the Benjamini-Hochberg q, cards tested."""
    t = e.harms_test
    if t is None:
        return ""
    return f" harms p={t.p:.2g} q={t.q:.2g} (BH over {t.tested}, fdr {t.fdr:g})"


@app.command("report")
def report(
    namespace: Annotated[
        str | None, typer.Option(help="only this namespace (default: all)")
    ] = None,
    limit: Annotated[int, typer.Option(min=0, help="rows shown in the table (0: all)")] = 50,
    plot: Annotated[
        Path | None,
        typer.Option(help="PNG of each card's interval (default: effects.png in the data dir)"),
    ] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Cards by verdict (harms, helps, no effect, not yet measurable): success rate served
    against withheld, the difference and its interval, and a plot."""
    from memory_core.effects.report import effects_report, plot_report

    with fail_on_errors():
        settings, engine = load()
        rep = effects_report(engine=engine, namespace=namespace, rules=settings.decay.effects)
        if fmt is Format.json:
            print_json(rep)
            return
        shown = rep.cards if limit == 0 else rep.cards[:limit]
        table(
            "cards by measured effect: " + ", ".join(f"{k} {v}" for k, v in rep.counts.items()),
            [
                "id",
                "namespace",
                "status",
                "verdict",
                "served",
                "withheld",
                "diff",
                "interval",
                "harms q",
            ],
            [
                [
                    str(c.card_id)[:8],
                    c.namespace,
                    c.status + (" (pinned)" if c.pinned else ""),
                    c.effect.label,
                    _rate(c.effect.served_successes, c.effect.served_uses),
                    _rate(c.effect.withheld_successes, c.effect.withheld_uses),
                    "-" if c.effect.difference is None else f"{c.effect.difference:+.3f}",
                    "-"
                    if c.effect.low is None or c.effect.high is None
                    else f"[{c.effect.low:+.3f}, {c.effect.high:+.3f}]",
                    "-" if c.effect.harms_test is None else f"{c.effect.harms_test.q:.3g}",
                ]
                for c in shown
            ],
        )
        path = plot or settings.data_dir / "effects.png"
        try:
            plot_report(rep, path)
        except ImportError:
            console.print("no plot: matplotlib is not installed (pip install matplotlib)")
            return
        console.print(f"plot: {path}", markup=False)


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.2f})" if n else "0"
