"""`hindsight dead-letters`: trajectories whose extraction kept failing (their retrospection,
or the LLM part of their facts); list and re-drive."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, print_json, table

app = typer.Typer(help="Dead-lettered trajectories.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


@app.command("list")
def list_cmd(
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 1000,
    fmt: FormatOpt = Format.table,
) -> None:
    """Dead letters with their error, the parts parked and how many times they were claimed."""
    from memory_core.retrospect.dead_letters import dead_letter_error, dead_parts, list_dead_letters

    with fail_on_errors():
        _, engine = load()
        rows = list_dead_letters(engine=engine, namespace=namespace, limit=limit)
        if fmt is Format.json:
            print_json(
                [
                    {
                        "id": str(r.id),
                        "key": r.key,
                        "namespace": r.namespace,
                        "attempts": r.attempts,
                        "parts": [p.part for p in dead_parts(r)],
                        "error": dead_letter_error(r),
                    }
                    for r in rows
                ]
            )
            return
        table(
            f"{len(rows)} dead letter(s)",
            ["id", "key", "namespace", "attempts", "error"],
            [[str(r.id), r.key[:40], r.namespace, r.attempts, dead_letter_error(r)] for r in rows],
        )


@app.command("redrive")
def redrive_cmd(
    ids: Annotated[list[str] | None, typer.Argument(help="ids or keys; none: all")] = None,
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
) -> None:
    """Send dead letters back to the queue; the next retrospect (and facts) run picks them up."""
    from memory_core.retrospect.dead_letters import redrive

    with fail_on_errors():
        _, engine = load()
        n = redrive(engine=engine, ids=ids or None, namespace=namespace)
        console.print(
            f"{n} dead letter(s) back to pending; run `hindsight retrospect` "
            "(and `hindsight facts extract` for parked facts) next"
        )
