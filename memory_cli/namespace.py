"""`hindsight namespace`: the namespaces with their counts, and deleting one leaving nothing."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, err_console, print_json, shown_of, table

app = typer.Typer(help="Namespaces: counts, and deletion of all they hold.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


def _by_status(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "0"


@app.command("list")
def namespace_list(fmt: FormatOpt = Format.table) -> None:
    """Every namespace with its cards and facts by status, trajectories and keys."""
    from memory_core.namespaces.counts import namespace_counts

    with fail_on_errors():
        _, engine = load()
        found = namespace_counts(engine)
    if fmt is Format.json:
        print_json(
            [
                {
                    "namespace": c.namespace,
                    "cards": c.cards,
                    "facts": c.facts,
                    "trajectories": c.trajectories,
                    "dead_letters": c.dead_letters,
                    "keys": c.keys,
                }
                for c in found
            ]
        )
        return
    rows = [
        [
            c.namespace,
            _by_status(c.cards),
            _by_status(c.facts),
            str(c.trajectories),
            str(c.dead_letters),
            str(c.keys),
        ]
        for c in found
    ]
    cols = ["namespace", "cards", "facts", "trajectories", "dead letters", "keys"]
    table(f"Namespaces: {shown_of(len(rows), len(rows))}", cols, rows)


@app.command("delete")
def namespace_delete(
    namespace: Annotated[str, typer.Argument(help="the namespace to delete")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Delete a namespace and everything it holds: cards and their history, facts,
    trajectories, uses, keys, cached LLM answers, index points and snapshot files. Safe to run
    again after an interrupted deletion; the deletion is recorded without the content."""
    from memory_core.namespaces.counts import namespace_counts
    from memory_core.namespaces.delete import delete_namespace

    with fail_on_errors():
        settings, engine = load()
        found = namespace_counts(engine, namespace)
        held = found[0].total if found else 0
        if not yes and not typer.confirm(
            f"delete namespace {namespace!r} ({held} cards, facts, trajectories and keys) "
            "and everything it holds, for good?",
            err=True,
        ):
            err_console.print("nothing deleted")
            raise typer.Exit(1)

        def step(what: str, n: int) -> None:
            err_console.print(f"{what}: {n} removed", markup=False, highlight=False)

        out = delete_namespace(
            engine=engine, settings=settings, namespace=namespace, actor="cli", on_step=step
        )
    if fmt is Format.json:
        print_json(
            {
                "namespace": namespace,
                "rows": out.rows,
                "files": out.files,
                "vectors": out.vectors,
            }
        )
        return
    console.print(
        f"namespace {namespace!r} deleted: {out.total} rows, {out.vectors} index points, "
        f"{out.files} snapshot files",
        markup=False,
        highlight=False,
    )
