"""`hindsight consolidate`: merge near-duplicate cards, retire contradicted facts."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_cli import stages
from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, err_console, print_json, shown_of, table

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


def consolidate(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="list the merges; write nothing")
    ] = False,
    namespace: Annotated[
        str | None, typer.Option(help="only this namespace (default: all)")
    ] = None,
    limit: Annotated[int, typer.Option(min=0, help="merges shown in the table (0: all)")] = 50,
    fmt: FormatOpt = Format.table,
) -> None:
    """Merge near-duplicate cards into one (evidence kept, history written); retire facts
    that a newer statement contradicts."""
    with fail_on_errors():
        settings, _ = load()
        with stages.progress("consolidate", settings) as report:
            summary = stages.consolidate(
                settings=settings, namespace=namespace, dry_run=dry_run, on_progress=report
            )
        if fmt is Format.json:
            print_json(summary)
            return
        if summary.similarity and "cosine" not in summary.similarity:
            from memory_core.embed.factory import NO_EMBEDDER

            err_console.print(f"[yellow]{NO_EMBEDDER}[/yellow]")
        table(
            "consolidate (dry run: nothing written)" if dry_run else "consolidate",
            ["namespaces", "cards", "merges", "cards merged away", "facts superseded", "embedded"],
            [
                [
                    summary.namespaces,
                    summary.cards_seen,
                    summary.merges,
                    summary.absorbed,
                    summary.facts_superseded,
                    summary.embedded,
                ]
            ],
        )
        if summary.index:
            console.print(f"vector index: {summary.index}", markup=False)
        shown = summary.plan if limit == 0 else summary.plan[:limit]
        if shown:
            table(
                ("merges (planned)" if dry_run else "merges")
                + f": {shown_of(len(shown), len(summary.plan))}",
                ["survivor", "absorbs", "confidence", "why"],
                [
                    [
                        m["survivor"][:8],
                        len(m["absorbed"]),
                        f"{m['confidence'][0]:.2f} -> {m['confidence'][1]:.2f}",
                        m["why"],
                    ]
                    for m in shown
                ],
            )
