"""`hindsight validate`: the data-quality gate over draft cards, and its last report."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli import stages
from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, print_json, table

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

app = typer.Typer(help="The data-quality gate over draft cards.", invoke_without_command=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="namespace (default: the setting)")]


@app.callback()
def validate(
    ctx: typer.Context, namespace: NamespaceOpt = None, fmt: FormatOpt = Format.table
) -> None:
    """Validate every draft now (the nightly flow does it after retrospect)."""
    if ctx.invoked_subcommand is not None:
        return
    with fail_on_errors():
        settings, engine = load()
        with stages.progress("validate", settings, _drafts_left(engine, namespace)) as report:
            summary = stages.validate(settings=settings, namespace=namespace, on_progress=report)
        if fmt is Format.json:
            print_json(summary)
            return
        table(
            "validation",
            ["evaluated", "active", "review", "rejected"],
            [[summary.evaluated, summary.activated, summary.review, summary.rejected]],
        )
        if summary.docs_index:
            console.print(f"report: {summary.docs_index}")


@app.command("report")
def report(fmt: FormatOpt = Format.table) -> None:
    """The last validation run: counts, failed expectations, and the path of its HTML."""
    from memory_core.validate.stage import latest_run

    with fail_on_errors():
        _, engine = load()
        run = latest_run(engine=engine)
        if run is None:
            console.print("no validation has run yet")
            return
        if fmt is Format.json:
            print_json(run.model_dump(mode="json"))
            return
        table(
            f"validation {run.created_at:%Y-%m-%d %H:%M} UTC",
            ["evaluated", "active", "review", "rejected"],
            [[run.evaluated, run.activated, run.review, run.rejected]],
        )
        if run.rule_failures:
            table(
                "failed expectations",
                ["expectation", "cards"],
                [[k, v] for k, v in run.rule_failures.items()],
            )
        console.print(f"HTML report: {run.docs_path or '(not written)'}")


def _drafts_left(engine: Engine, namespace: str | None) -> Callable[[], tuple[int, int]]:
    """Progress of a validation: drafts decided out of the drafts there were at the start."""
    from memory_core.status import card_counts

    start = card_counts(engine=engine, namespace=namespace).get("draft", 0)

    def poll() -> tuple[int, int]:
        left = card_counts(engine=engine, namespace=namespace).get("draft", 0)
        return max(start - left, 0), start

    return poll
