"""`hindsight decay`: the nightly's last stage alone, or (with --dry-run) its plan."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli import stages
from memory_cli.context import datetime_arg, fail_on_errors, load
from memory_cli.output import Format, console, print_json, table

if TYPE_CHECKING:
    from memory_core.decay import Change

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


def decay(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="list what would change; write nothing")
    ] = False,
    namespace: Annotated[
        str | None, typer.Option(help="only this namespace (default: all)")
    ] = None,
    now: Annotated[
        str | None, typer.Option(help="pretend it is this UTC time (a what-if with --dry-run)")
    ] = None,
    limit: Annotated[int, typer.Option(min=0, help="rows shown in the table (0: all)")] = 100,
    fmt: FormatOpt = Format.table,
) -> None:
    """Fade unused cards, archive cold ones and those over the cap (the nightly's last stage)."""
    with fail_on_errors():
        settings, _ = load()
        clock = datetime_arg(now, field="now")
        with stages.progress("decay", settings) as report:
            summary = stages.decay(
                settings=settings,
                namespace=namespace,
                dry_run=dry_run,
                now=clock,
                on_progress=report,
            )
        if fmt is Format.json:
            print_json(summary)
            return
        table(
            "decay (dry run: nothing written)" if dry_run else "decay",
            ["faded", "archived: unused", "archived: over the cap"],
            [[summary.decayed, summary.archived_unused, summary.archived_cap]],
        )
        if not dry_run:
            return
        shown = summary.changes if limit == 0 else summary.changes[:limit]
        clock_now = summary.now or datetime.now(UTC)
        table(
            f"the plan: {len(summary.changes)} change(s), none written",
            ["card", "namespace", "before", "after", "why"],
            [_change_row(c, clock_now) for c in shown],
        )
        if len(shown) < len(summary.changes):
            console.print(
                f"... and {len(summary.changes) - len(shown)} more "
                "(--limit 0 shows all, --format json lists them as JSON)"
            )


def _change_row(c: Change, now: datetime) -> list[object]:
    idle = (now - c.idle_since).total_seconds() / 86400
    if c.rule == "decay":
        before = f"conf {c.confidence_before:.3f}"
        after = f"conf {c.confidence_after:.3f} (tier {c.tier_after})"
    else:
        before = f"{c.status_before}, conf {c.confidence_before:.3f}"
        after = c.status_after + (f" (score {c.score:.3f})" if c.score is not None else "")
    return [str(c.card_id), c.namespace, before, after, f"{c.reason}; idle {idle:.0f} days"]
