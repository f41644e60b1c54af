"""`hindsight archive`: list the cold cards, restore one."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli import ids
from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, print_json, shown_of, table

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


app = typer.Typer(help="Cold cards: out of retrieval, kept, restorable.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="namespace (default: the setting)")]


@app.command("list")
def list_cmd(
    namespace: NamespaceOpt = None,
    restored: Annotated[bool, typer.Option(help="also cards restored since")] = False,
    limit: Annotated[int, typer.Option(min=1, max=10000)] = 100,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    fmt: FormatOpt = Format.table,
) -> None:
    """Archived cards, most recently archived first, with why they left."""
    from memory_core.decay import list_archive

    with fail_on_errors():
        settings, engine = load()
        ns = namespace or settings.namespace
        entries = list_archive(
            engine=engine, namespace=ns, include_restored=restored, limit=limit, offset=offset
        )
        if fmt is Format.json:
            print_json(entries)
            return
        columns = ["card", "archived", "why", "conf", "last used", "scenario"]
        rows: list[list[object]] = []
        for e in entries:
            row: list[object] = [
                str(e.card_id),
                f"{e.archived_at:%Y-%m-%d %H:%M}",
                e.detail,
                f"{e.confidence:.2f}",
                f"{e.last_used_at:%Y-%m-%d}" if e.last_used_at else "never",
                e.scenario,
            ]
            if restored:
                row.append(f"{e.restored_at:%Y-%m-%d} by {e.restored_by}" if e.restored_at else "")
            rows.append(row)
        total = _archive_count(engine, ns, include_restored=restored)
        table(
            f"archived cards in {ns!r}: {shown_of(len(entries), total, offset)}",
            [*columns, "restored"] if restored else columns,
            rows,
        )
        if offset + len(entries) < total:
            console.print(f"next page: --offset {offset + len(entries)} (or --limit {total})")


def _archive_count(engine: Engine, namespace: str, *, include_restored: bool) -> int:
    """How many entries `archive list` pages through (its filters, without the page)."""
    from sqlalchemy import func, select
    from sqlmodel import Session, col

    from memory_core.models.card import Card, CardArchive

    q = (
        select(func.count())
        .select_from(CardArchive)
        .join(Card, col(Card.card_id) == col(CardArchive.card_id))
        .where(col(CardArchive.namespace) == namespace)
    )
    if not include_restored:
        q = q.where(col(CardArchive.restored_at).is_(None))
    with Session(engine) as session:
        return int(session.execute(q).scalar_one())


@app.command("restore")
def restore_cmd(
    card_id: str,
    namespace: NamespaceOpt = None,
    by: Annotated[str | None, typer.Option("--by", help="who restores (default: $USER)")] = None,
) -> None:
    """Bring an archived card back into retrieval (active), its history intact."""
    import getpass

    from memory_core.decay import restore

    with fail_on_errors():
        settings, engine = load()
        card = restore(
            engine=engine,
            namespace=namespace or settings.namespace,
            card_id=ids.card_id(card_id, engine=engine),
            actor=by or os.environ.get("USER") or getpass.getuser(),
        )
        console.print(f"restored {card.card_id}: active again (version {card.version})")
