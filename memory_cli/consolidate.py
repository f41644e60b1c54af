"""`hindsight consolidate` (merge near-duplicates) and `hindsight cards history ID`."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_cli import stages
from memory_cli.archive import card_id_arg
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


def history(card_id: str, fmt: FormatOpt = Format.table) -> None:
    """Every version of a card or fact: when, who, why."""
    from memory_core.serve.reads import card_history

    with fail_on_errors():
        _, engine = load()
        # the served read: reasons and snapshots redacted as the API and MCP server show them
        card, versions = card_history(engine=engine, card_id=card_id_arg(card_id, engine))
        if fmt is Format.json:
            print_json({"card": card, "versions": versions, "total": len(versions)})
            return
        pointer = f"; replaced by {card.superseded_by}" if card.superseded_by else ""
        console.print(f"{card.card_id} ({card.kind}, {card.status}, v{card.version}){pointer}")
        table(
            f"history: {shown_of(len(versions), len(versions))}",
            ["version", "when (UTC)", "by", "why"],
            [[v.version, f"{v.created_at:%Y-%m-%d %H:%M}", v.actor, v.reason] for v in versions],
        )
