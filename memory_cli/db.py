"""`hindsight db`: the database schema."""

from __future__ import annotations

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import console

app = typer.Typer(help="Database schema.", no_args_is_help=True)


@app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Migrate the schema to the latest revision (safe to repeat)."""
    from memory_core import db

    with fail_on_errors():
        settings, _ = load(migrate=False)
        db.upgrade(settings, revision)
        console.print(f"schema at {revision} on {db.make_engine(settings).url!r}")
