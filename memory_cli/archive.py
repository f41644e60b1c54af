"""`hindsight decay` (the stage alone, or its plan) and `hindsight archive` (list, restore)."""

from __future__ import annotations

import getpass
import os
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli import stages
from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, print_json, shown_of, table
from memory_core.errors import InvalidInput

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_core.decay import Change


app = typer.Typer(help="Cold cards: out of retrieval, kept, restorable.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="namespace (default: the setting)")]


def card_id_arg(value: str, engine: Engine) -> uuid.UUID:
    """A card id from the command line (the id or a unique prefix), or a clear error."""
    from memory_cli.ids import card_id

    return card_id(value, engine=engine)


def _now_arg(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidInput(f"{value!r} is not an ISO date or time", field="now") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


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
        clock = _now_arg(now)
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
            [
                "faded",
                "archived: unused",
                "archived: over the cap",
                "harms: to review",
                "no effect: faded",
            ],
            [
                [
                    summary.decayed,
                    summary.archived_unused,
                    summary.archived_cap,
                    summary.harmful_to_review,
                    summary.faded_no_effect,
                ]
            ],
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
    if c.rule in ("decay", "fade"):
        before = f"conf {c.confidence_before:.3f}"
        after = f"conf {c.confidence_after:.3f} (tier {c.tier_after})"
    else:
        before = f"{c.status_before}, conf {c.confidence_before:.3f}"
        after = c.status_after + (f" (score {c.score:.3f})" if c.score is not None else "")
    return [str(c.card_id), c.namespace, before, after, f"{c.reason}; idle {idle:.0f} days"]


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
    from memory_core.decay import restore

    with fail_on_errors():
        settings, engine = load()
        card = restore(
            engine=engine,
            namespace=namespace or settings.namespace,
            card_id=card_id_arg(card_id, engine),
            actor=by or os.environ.get("USER") or getpass.getuser(),
        )
        console.print(f"restored {card.card_id}: active again (version {card.version})")
