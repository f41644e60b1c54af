"""`hindsight`: ingest trajectories, run the flows, inspect and query cards."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from memory_cli import archive as archive_cmd
from memory_cli import cards as cards_cmd
from memory_cli import changes as changes_cmd
from memory_cli import consolidate as consolidate_cmd
from memory_cli import db as db_cmd
from memory_cli import dead_letters as dead_letters_cmd
from memory_cli import decay as decay_cmd
from memory_cli import effects as effects_cmd
from memory_cli import facts as facts_cmd
from memory_cli import index as index_cmd
from memory_cli import keys as keys_cmd
from memory_cli import memory as memory_cmd
from memory_cli import namespace as namespace_cmd
from memory_cli import pipeline, watchdog
from memory_cli import replay as replay_cmd
from memory_cli import review as review_cmd
from memory_cli import serve as serve_cmd
from memory_cli import up as up_cmd
from memory_cli import validate as validate_cmd
from memory_cli.context import VERBOSE, fail_on_errors, load
from memory_cli.entry import print_version
from memory_cli.output import (
    Format,
    IngestFormat,
    console,
    err_console,
    literal,
    polled_progress,
    print_json,
    table,
)


class _WorkflowOrder(TyperGroup):
    """Commands listed in the order they were registered (below: the workflow's), groups and
    single commands alike; Typer would list single commands first."""

    def list_commands(self, ctx: Any) -> list[str]:  # typer's vendored click.Context
        return [n for n in _ORDER if n in self.commands] + sorted(
            n for n in self.commands if n not in _ORDER
        )

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None and not cmd.short_help and cmd.help:
            # the listing shows a docstring's first paragraph as one line, not as wrapped
            cmd.short_help = " ".join(cmd.help.split("\n\n")[0].split())
        return cmd


_ORDER: list[str] = []
app = typer.Typer(
    cls=_WorkflowOrder,
    help=__doc__,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
IngestFormatOpt = Annotated[
    IngestFormat,
    typer.Option(
        "--format", "-f", help="the report as table or json; otlp: the files are trace exports"
    ),
]
_SHOWN_REFUSALS = 10  # a bad file of 8,000 lines gets a summary, not 8,000 lines


@app.callback()
def _command() -> None:
    """Every command, when run as the `hindsight` program (not inside a test's CliRunner):
    the watchdog stops whatever it started if it is killed (see memory_cli.watchdog)."""
    if Path(sys.argv[0]).name == "hindsight" or sys.argv[0].endswith("memory_cli/__main__.py"):
        watchdog.start()


def ingest(
    paths: Annotated[list[str], typer.Argument(help="files, folders, or - for stdin")],
    namespace: Annotated[str | None, typer.Option(help="namespace for records without one")] = None,
    task_type: Annotated[str | None, typer.Option(help="task type for records without one")] = None,
    fmt: IngestFormatOpt = IngestFormat.table,
) -> None:
    """Store trajectories (OpenAI chat runs, generic steps), conversations (session
    transcripts, message lists) and OpenTelemetry trace exports (OTLP/JSON, one request a
    line, as the collector's file exporter writes them); duplicates are skipped."""
    from memory_core.ingest.otlp.files import TraceCollector
    from memory_core.ingest.otlp.receive import ingest_spans
    from memory_core.ingest.store import ingest as ingest_records
    from memory_core.ingest.store import iter_sources, source_files

    with fail_on_errors():
        for raw in paths:  # a wrong path is refused before a store is opened or a bar drawn
            if raw != "-":
                source_files(Path(raw))
        settings, engine = load()
        seen = [0]

        def bump(n: int) -> None:
            seen[0] += n

        traces = TraceCollector(only_traces=fmt is IngestFormat.otlp)
        with polled_progress("ingest", lambda: (seen[0], 0)):
            report = ingest_records(
                engine=engine,
                records=traces.filter(iter_sources(paths)),
                namespace=namespace or settings.namespace,
                task_type=task_type or settings.default_task_type,
                max_observation_chars=settings.limits.max_observation_chars,
                on_progress=bump,
                limits=settings.limits,
            )
            if traces.exports:  # a file holds all there is: a trace without its root goes in
                spans = ingest_spans(  # as incomplete, not into the receiver's buffer
                    engine=engine,
                    namespace=namespace or settings.namespace,
                    spans=traces.spans,
                    task_type=task_type or settings.default_task_type,
                    limits=settings.limits,
                    wait=None,
                )
                report.stored += spans.stored
                report.duplicates += spans.duplicates
                report.refused += spans.refused
        if fmt is IngestFormat.json:
            print_json(report.model_dump(mode="json", exclude={"source"}))
        else:
            table(
                "ingest",
                ["stored", "already stored", "refused"],
                [[report.stored, report.duplicates, len(report.refused)]],
            )
            for refusal in report.refused[:_SHOWN_REFUSALS]:
                console.print("[red]refused[/red] " + literal(refusal.error), soft_wrap=True)
            if len(report.refused) > _SHOWN_REFUSALS:
                more = len(report.refused) - _SHOWN_REFUSALS
                console.print(f"[red]... and {more} more refused[/red] (--format json lists all)")
        if not report.seen:  # an empty folder: nothing was read, which is not a success
            err_console.print(
                "[red]no records[/red] in " + literal(", ".join(paths)), soft_wrap=True
            )
            raise typer.Exit(2)
        if report.refused:  # the rest went in; the caller still learns something was refused
            raise typer.Exit(2)


def status(
    fmt: FormatOpt = Format.table, namespace: Annotated[str | None, typer.Option()] = None
) -> None:
    """Trajectories and cards by status."""
    from memory_core.status import card_counts, trajectory_counts

    with fail_on_errors():
        _, engine = load()
        t, c = (
            trajectory_counts(engine=engine, namespace=namespace),
            card_counts(engine=engine, namespace=namespace),
        )
        if fmt is Format.json:
            print_json({"trajectories": t, "cards": c})
            return
        table("trajectories", list(t) or ["(none)"], [list(t.values())])
        table("cards", list(c) or ["(none)"], [list(c.values())])


def _version(value: bool) -> None:
    if value:
        print_version()
        raise typer.Exit()


@app.callback()
def _root(
    _version_opt: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Say which store a command opens, also when not on a terminal."
        ),
    ] = False,
) -> None:
    """`hindsight`: ingest agent runs, distil experience cards every night, serve them back.

    Stage commands run in this process; with PREFECT_API_URL set they run as flows on that
    Prefect server (see docs/getting-started.md: "Where the stages run")."""
    VERBOSE.on = verbose
    # run as the `hindsight` program (not inside a test's CliRunner): the watchdog stops
    # whatever the command started if it is killed, even by SIGKILL (memory_cli.watchdog)
    if Path(sys.argv[0]).name == "hindsight" or sys.argv[0].endswith("memory_cli/__main__.py"):
        watchdog.start()


# the root help lists the commands in the order of the workflow, one panel per step
_INGEST, _STAGES, _CARDS = "1. Ingest", "2. Nightly and stages", "3. Cards and facts"
_REVIEW, _SERVE, _OPS = "4. Review", "5. Serve", "6. Operations"
app.command("ingest", rich_help_panel=_INGEST)(ingest)
app.command("status", rich_help_panel=_INGEST)(status)
app.command("nightly", rich_help_panel=_STAGES)(pipeline.nightly)
app.command("retrospect", rich_help_panel=_STAGES)(pipeline.retrospect)
app.add_typer(validate_cmd.app, name="validate", rich_help_panel=_STAGES)
app.command("consolidate", rich_help_panel=_STAGES)(consolidate_cmd.consolidate)
app.command("decay", rich_help_panel=_STAGES)(decay_cmd.decay)
app.add_typer(cards_cmd.app, name="cards", rich_help_panel=_CARDS)
app.add_typer(effects_cmd.app, name="effects", rich_help_panel=_CARDS)
app.add_typer(facts_cmd.app, name="facts", rich_help_panel=_CARDS)
app.add_typer(memory_cmd.app, name="memory", rich_help_panel=_CARDS)
app.command("replay", rich_help_panel=_CARDS)(replay_cmd.replay_cmd)
app.add_typer(review_cmd.app, name="review", rich_help_panel=_REVIEW)
app.add_typer(archive_cmd.app, name="archive", rich_help_panel=_REVIEW)
app.add_typer(dead_letters_cmd.app, name="dead-letters", rich_help_panel=_REVIEW)
app.command("changes", rich_help_panel=_REVIEW)(changes_cmd.changes)
app.command("serve", rich_help_panel=_SERVE)(serve_cmd.serve)
app.command("mcp", rich_help_panel=_SERVE)(serve_cmd.mcp)
app.add_typer(keys_cmd.app, name="keys", rich_help_panel=_SERVE)
app.add_typer(namespace_cmd.app, name="namespace", rich_help_panel=_OPS)
app.command("up", rich_help_panel=_OPS)(up_cmd.up)
app.command("deploy", rich_help_panel=_OPS)(up_cmd.deploy)
app.add_typer(db_cmd.app, name="db", rich_help_panel=_OPS)
app.add_typer(index_cmd.app, name="index", rich_help_panel=_OPS)

_ORDER += [
    "ingest",
    "status",
    "nightly",
    "retrospect",
    "validate",
    "consolidate",
    "decay",
    "cards",
    "facts",
    "memory",
    "effects",
    "replay",
    "review",
    "archive",
    "dead-letters",
    "serve",
    "mcp",
    "keys",
    "namespace",
    "up",
    "deploy",
    "db",
    "index",
]

if __name__ == "__main__":
    app()
