"""`hindsight`: ingest trajectories, run the flows, inspect and query cards."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer

from memory_cli import archive as archive_cmd
from memory_cli import cards as cards_cmd
from memory_cli import consolidate as consolidate_cmd
from memory_cli import dead_letters as dead_letters_cmd
from memory_cli import facts as facts_cmd
from memory_cli import index as index_cmd
from memory_cli import memory as memory_cmd
from memory_cli import replay as replay_cmd
from memory_cli import review as review_cmd
from memory_cli import serve as serve_cmd
from memory_cli import stages
from memory_cli import up as up_cmd
from memory_cli.context import fail_on_errors, load, prefect_defaults
from memory_cli.output import Format, console, polled_progress, print_json, table

app = typer.Typer(help=__doc__, no_args_is_help=True, pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(cards_cmd.app, name="cards")
app.add_typer(facts_cmd.app, name="facts")
app.add_typer(memory_cmd.app, name="memory")
app.add_typer(dead_letters_cmd.app, name="dead-letters")
app.add_typer(review_cmd.validate_app, name="validate")
app.add_typer(review_cmd.review_app, name="review")
app.add_typer(archive_cmd.app, name="archive")
app.add_typer(index_cmd.app, name="index")
app.command("decay")(archive_cmd.decay)
app.command("consolidate")(consolidate_cmd.consolidate)
cards_cmd.app.command("history")(consolidate_cmd.history)
app.add_typer(serve_cmd.keys_app, name="keys")
app.command("serve")(serve_cmd.serve)
app.command("mcp")(serve_cmd.mcp)
app.command("replay")(replay_cmd.replay_cmd)
app.command("up")(up_cmd.up)
app.command("deploy")(up_cmd.deploy)

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Migrate the schema to the latest revision (safe to repeat)."""
    from memory_core import db

    with fail_on_errors():
        settings, _ = load(migrate=False)
        db.upgrade(settings, revision)
        console.print(f"schema at {revision} on {db.make_engine(settings).url!r}")


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="files, folders, or - for stdin")],
    namespace: Annotated[str | None, typer.Option(help="namespace for records without one")] = None,
    task_type: Annotated[str | None, typer.Option(help="task type for records without one")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Store trajectories (OpenAI chat runs, generic steps) and conversations (session
    transcripts, message lists); duplicates are skipped."""
    from memory_core.ingest.store import ingest as ingest_records
    from memory_core.ingest.store import iter_sources

    with fail_on_errors():
        settings, engine = load()
        seen = [0]

        def bump(n: int) -> None:
            seen[0] += n

        with polled_progress("ingest", lambda: (seen[0], 0)):
            report = ingest_records(
                engine=engine,
                records=iter_sources(paths),
                namespace=namespace or settings.namespace,
                task_type=task_type or settings.default_task_type,
                max_observation_chars=settings.max_observation_chars,
                on_progress=bump,
            )
        if fmt is Format.json:
            print_json(
                {
                    "stored": report.stored,
                    "duplicates": report.duplicates,
                    "refused": [{"record": r, "error": e} for r, e in report.refused],
                }
            )
        else:
            table(
                "ingest",
                ["stored", "already stored", "refused"],
                [[report.stored, report.duplicates, len(report.refused)]],
            )
            for _name, why in report.refused:
                console.print(f"[red]refused[/red] {why}")
        if report.refused and not report.stored and not report.duplicates:
            raise typer.Exit(2)


@app.command()
def retrospect(
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Run the retrospect flow over every pending trajectory."""
    with fail_on_errors():
        settings, engine = load()
        with polled_progress("retrospect", lambda: _progress(engine, namespace)):
            summary = stages.retrospect(settings=settings, namespace=namespace)
        _show_summary(summary, fmt)


@app.command()
def nightly(
    input: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="files/folders to ingest first")
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="namespace for ingested runs")] = None,
    task_type: Annotated[str | None, typer.Option(help="task type for runs without one")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Run the nightly flow: ingest (optional), retrospect, validate, consolidate, decay."""
    from sqlmodel import Session

    from memory_core.cards.query import example_state

    with fail_on_errors():
        settings, engine = load()
        prefect_defaults(settings.data_dir)
        from flows.nightly import nightly as nightly_flow
        from flows.params import NightlyParams

        params = NightlyParams(
            input=[str(Path(p).resolve()) for p in input or []],
            namespace=namespace,
            task_type=task_type,
        )
        with polled_progress("nightly", lambda: _progress(engine, None)):
            summary = nightly_flow(params)
        if fmt is Format.json:
            print_json(summary)
            return
        for ing in summary.ingested:
            console.print(
                f"ingested {ing.source}: {ing.stored} new, {ing.duplicates} already "
                f"stored, {len(ing.refused)} refused"
            )
        _show_summary(summary.retrospect.model_dump(), fmt)
        v = summary.validation
        console.print(
            f"validated {v.evaluated} drafts: {v.activated} active, {v.review} to "
            f"review, {v.rejected} rejected" + (f"; report: {v.docs_index}" if v.docs_index else "")
        )
        m = summary.consolidation
        console.print(
            f"consolidate: {m.merges} merges absorbing {m.absorbed} near-duplicates, "
            f"{m.facts_superseded} facts superseded" + (f"; index: {m.index}" if m.index else "")
        )
        d = summary.decay
        console.print(
            f"decay: {d.decayed} cards faded, {d.archived_unused} archived as unused, "
            f"{d.archived_cap} archived over the cap"
        )
        ns = namespace or settings.namespace
        cards_cmd.show_cards_table(engine, ns, title=f"cards in namespace {ns!r}", limit=20)
        with Session(engine) as session:
            state = example_state(session=session, namespace=ns) or {"tool": "<tool name>"}
        ns_opt = "" if ns == settings.namespace else f" --namespace {shlex.quote(ns)}"
        console.print(
            "\nquery them with:\n  hindsight cards query"
            f"{ns_opt} --state {shlex.quote(json.dumps(state))} --explain",
            soft_wrap=True,
        )


@app.command()
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


def _progress(engine: object, namespace: str | None) -> tuple[int, int]:
    from memory_core.status import trajectory_counts

    counts = trajectory_counts(engine=engine, namespace=namespace)  # type: ignore[arg-type]
    finished = counts.get("done", 0) + counts.get("dead_letter", 0)
    return finished, sum(counts.values())


_LLM_ONLY = (
    "deferred",
    "llm_calls",
    "tokens_sent",
    "tokens_received",
    "tokens_saved",
    "budget_exhausted",
)


def _show_summary(summary: dict[str, object], fmt: Format) -> None:
    if fmt is Format.json:
        print_json(summary)
        return
    # the LLM columns only when the LLM did something
    shown = {k: v for k, v in summary.items() if k not in _LLM_ONLY or v}
    table("retrospect", list(shown), [list(shown.values())])


if __name__ == "__main__":
    app()
