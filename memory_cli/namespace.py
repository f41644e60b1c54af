"""`hindsight namespace`: the namespaces with their counts, export and import, retention
policies, and deleting one leaving nothing."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, err_console, print_json, shown_of, table
from memory_core.errors import InvalidInput

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from memory_core.settings import Settings

app = typer.Typer(
    help="Namespaces: counts, export and import, retention, and deletion of all they hold.",
    no_args_is_help=True,
)
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


@app.command("export")
def namespace_export(
    namespace: Annotated[str, typer.Argument(help="the namespace to export")],
    with_trajectories: Annotated[
        bool,
        typer.Option(
            "--with-trajectories", help="the raw runs too (else only what evidence cites of them)"
        ),
    ] = False,
) -> None:
    """Write a namespace as JSON Lines to standard output: a header naming the format and
    schema, then its runs, cards and facts (with their validity), versions and evidence."""
    from memory_core.namespaces.export import export_namespace

    with fail_on_errors():
        _, engine = load()
        out = sys.stdout.buffer
        counts = export_namespace(
            engine=engine,
            namespace=namespace,
            write=out.write,
            with_trajectories=with_trajectories,
        )
        out.flush()
    err_console.print(
        "exported " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing"),
        markup=False,
        highlight=False,
    )


@app.command("import")
def namespace_import(
    file: Annotated[Path, typer.Argument(help="a file written by `hindsight namespace export`")],
    into: Annotated[
        str | None, typer.Option("--into", help="the namespace to import into (default: its own)")
    ] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Store a namespace export, all of it or nothing; importing it again changes nothing."""
    from memory_core.namespaces.importer import import_namespace

    with fail_on_errors():
        _, engine = load()
        if not file.is_file():
            raise InvalidInput(f"no such file: {file}", field="file")
        with file.open("rb") as lines:
            out = import_namespace(engine=engine, lines=lines, namespace=into)
    same = [str(c) for c in out.same_signature]
    if fmt is Format.json:
        print_json(
            {
                "namespace": out.namespace,
                "read": dict(out.read),
                "added": out.added,
                "same_signature": same,
            }
        )
        return
    console.print(
        f"imported into {out.namespace!r}: "
        + ", ".join(f"{k} {out.added[k]} new of {out.read[k]}" for k in out.added),
        markup=False,
        highlight=False,
    )
    if same:
        shown = ", ".join(c[:8] for c in same[:10]) + (", ..." if len(same) > 10 else "")
        console.print(
            f"{len(same)} card(s) of the file not stored: the namespace holds another live card "
            f"with the same signature ({shown})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def _days(days: float) -> str:
    return "keep all" if days <= 0 else f"{days:g} days"


@app.command("retention")
def namespace_retention(
    namespace: Annotated[str, typer.Argument(help="the namespace whose policy to show or set")],
    trajectories_days: Annotated[
        float | None,
        typer.Option(
            "--trajectories-days",
            min=0,
            help="raw runs older than this are removed by the nightly (0: keep all)",
        ),
    ] = None,
    uses_days: Annotated[
        float | None,
        typer.Option(
            "--uses-days", min=0, help="uses, outcomes and logged queries older than this go"
        ),
    ] = None,
    default: Annotated[
        bool, typer.Option("--default", help="follow the settings again (before any days given)")
    ] = False,
    apply: Annotated[
        bool, typer.Option("--apply", help="apply the policy now, as the nightly's stage does")
    ] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Show a namespace's retention policy and what the nightly last removed, or set it: the
    runs cards cite stay as summaries (their text gone), the rest of the old runs and uses go."""
    from memory_core.retention.policy import policy_of, set_policy
    from memory_core.retention.stage import removed_text

    with fail_on_errors():
        settings, engine = load()
        if default or trajectories_days is not None or uses_days is not None:
            set_policy(
                engine=engine,
                namespace=namespace,
                actor="cli",
                trajectories_days=trajectories_days,
                uses_days=uses_days,
                clear=default,
            )
        if apply:
            _apply(settings, engine, namespace)
        out = policy_of(engine, settings.decay, namespace)
    if fmt is Format.json:
        print_json(out.model_dump(mode="json"))
        return

    def whose(own: float | None) -> str:
        return "this namespace's" if own is not None else "the settings'"

    last = (
        f"{out.last_run_at:%Y-%m-%d %H:%M} UTC: {removed_text(out.last_removed)}"
        if out.last_run_at
        else "never ran"
    )
    for line in (
        f"namespace {namespace!r}",
        f"trajectories: {_days(out.trajectories_days)} ({whose(out.own_trajectories_days)})",
        f"uses and queries: {_days(out.uses_days)} ({whose(out.own_uses_days)})",
        f"last retention: {last}",
    ):
        console.print(line, markup=False, highlight=False)


def _apply(settings: Settings, engine: Engine, namespace: str) -> None:
    """The retention stage on one namespace, under its lease, each batch told on stderr."""
    from memory_core.retention.apply import apply_retention
    from memory_core.retention.stage import removed_text, retention_all

    def batch(counts: Counter[str]) -> None:
        err_console.print(f"so far: {removed_text(dict(counts))}", markup=False, highlight=False)

    got = retention_all(
        engine=engine,
        namespace=namespace,
        part=lambda ns: apply_retention(
            engine=engine, rules=settings.decay, namespace=ns, on_batch=batch
        ),
    )
    if got.elsewhere:
        raise InvalidInput(f"another run is applying {namespace!r}'s retention now")
