"""`hindsight changes --since DATE`: what changed in the cards since then, and why."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_cli.context import datetime_arg, fail_on_errors, load
from memory_cli.output import Format, console, literal, print_json, table

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


def changes(
    since: Annotated[str, typer.Option(help="ISO date or time (UTC when it names no zone)")],
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 10000,
    fmt: FormatOpt = Format.table,
) -> None:
    """Each card created, merged (into what), superseded, archived, restored or sent to review
        since a time, by whom and why, and what retention removed from each namespace (the nightly
    run's changes report prints the same)."""
    from collections import Counter

    from memory_core.changes import changes_since

    with fail_on_errors():
        when = datetime_arg(since, field="--since")
        assert when is not None
        _, engine = load()
        rows = changes_since(engine=engine, since=when, namespace=namespace, limit=limit)
        if fmt is Format.json:
            print_json(
                [
                    {
                        "at": c.at.isoformat(),
                        "card_id": str(c.card_id),
                        "namespace": c.namespace,
                        "scenario": c.scenario,
                        "what": c.what,
                        "into": str(c.into) if c.into else None,
                        "actor": c.actor,
                        "reason": c.reason,
                        "evidence": c.evidence,
                    }
                    for c in rows
                ]
            )
            return
        counts = Counter(c.what for c in rows)
        summary = ", ".join(f"{n} {what}" for what, n in counts.most_common()) or "nothing"
        table(
            f"changes since {when:%Y-%m-%d %H:%M} UTC: {summary}",
            ["when", "card", "what", "into", "evidence", "by", "reason", "scenario"],
            [
                [
                    f"{c.at:%m-%d %H:%M}",
                    str(c.card_id)[:8],
                    c.what,
                    str(c.into)[:8] if c.into else "",
                    str(c.evidence),
                    c.actor,
                    c.reason[:120],
                    c.scenario[:60],
                ]
                for c in rows
            ],
        )
        if len(rows) == limit:
            console.print(literal(f"the first {limit}: --limit for more"))
        from memory_core.retention.policy import runs_since
        from memory_core.retention.stage import removed_text

        for r in runs_since(engine, when):
            if namespace is None or r.namespace == namespace:
                console.print(literal(f"retention {r.namespace}: {removed_text(r.last_removed)}"))
