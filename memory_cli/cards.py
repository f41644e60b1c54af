"""`hindsight cards`: list, show and query cards."""

from __future__ import annotations

import uuid
from typing import Annotated

import typer
from sqlalchemy.engine import Engine
from sqlmodel import Session

from memory_cli.context import fail_on_errors, load, read_json_arg
from memory_cli.output import Format, console, print_json, table
from memory_core.cards.query import get_card, list_cards, query_cards, to_public
from memory_core.errors import InvalidInput
from memory_core.models.card import Card

app = typer.Typer(help="Inspect and query experience cards.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="namespace (default: the setting)")]


def _row(c: Card) -> list[object]:
    return [
        str(c.card_id)[:8],
        c.status,
        f"{c.confidence:.2f}",
        c.evidence_count,
        c.scenario,
        "\n".join(c.preconditions) or "(always)",
        " → ".join(a.get("tool", "") for a in c.action_sequence),
    ]


_COLUMNS = ["id", "status", "conf", "evidence", "scenario", "preconditions", "actions"]


def show_cards_table(engine: Engine, namespace: str, *, title: str, limit: int) -> None:
    """Print the most recently updated cards of a namespace."""
    with Session(engine) as session:
        cards = list_cards(session=session, namespace=namespace, limit=limit)
    table(title, _COLUMNS, [_row(c) for c in cards])


@app.command("list")
def list_cmd(
    namespace: NamespaceOpt = None,
    status: Annotated[list[str] | None, typer.Option(help="repeat for several")] = None,
    kind: Annotated[str | None, typer.Option(help="experience or fact")] = None,
    text: Annotated[str | None, typer.Option(help="scenario contains")] = None,
    min_confidence: Annotated[float | None, typer.Option(min=0.0, max=1.0)] = None,
    limit: Annotated[int, typer.Option(min=1, max=10000)] = 50,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    fmt: FormatOpt = Format.table,
) -> None:
    """Cards, most recently updated first."""
    with fail_on_errors():
        settings, engine = load()
        ns = namespace or settings.namespace
        with Session(engine) as session:
            cards = list_cards(
                session=session,
                namespace=ns,
                statuses=status,
                kind=kind,
                text=text,
                min_confidence=min_confidence,
                limit=limit,
                offset=offset,
            )
        if fmt is Format.json:
            print_json([to_public(c) for c in cards])
        else:
            table(f"cards in {ns!r} ({len(cards)} shown)", _COLUMNS, [_row(c) for c in cards])


@app.command("show")
def show(card_id: str, namespace: NamespaceOpt = None, fmt: FormatOpt = Format.table) -> None:
    """One card with its evidence."""
    with fail_on_errors():
        settings, engine = load()
        try:
            cid = uuid.UUID(card_id)
        except ValueError as exc:
            raise InvalidInput(f"{card_id!r} is not a card id (a UUID)", field="card_id") from exc
        with Session(engine) as session:
            card = get_card(session=session, namespace=namespace or settings.namespace, card_id=cid)
        if fmt is Format.json:
            print_json(card)
            return
        fields = card.model_dump(mode="json", exclude={"evidence"})
        table(f"card {card.card_id}", ["field", "value"], [[k, v] for k, v in fields.items()])
        table(
            "evidence",
            ["trajectory", "step", "condition", "result"],
            [[str(e.trajectory_id)[:8], e.step, e.condition, e.result] for e in card.evidence],
        )


@app.command("query")
def query(
    state: Annotated[str, typer.Option(help="task state as JSON, @file, or - for stdin")],
    namespace: NamespaceOpt = None,
    top_k: Annotated[int, typer.Option(min=1, max=100)] = 5,
    explain: Annotated[bool, typer.Option(help="show each precondition's verdict")] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Active cards whose preconditions hold on the task state, best first."""
    with fail_on_errors():
        settings, engine = load()
        task_state = read_json_arg(state, field="state")
        if not isinstance(task_state, dict):
            raise InvalidInput("the task state must be a JSON object", field="state")
        with Session(engine) as session:
            matches = query_cards(
                session=session,
                namespace=namespace or settings.namespace,
                state=task_state,
                top_k=top_k,
                weights=settings.ranking,
                explain=explain,
            )
        if fmt is Format.json:
            print_json(
                [
                    {
                        "card": to_public(m.card),
                        "score": vars(m.terms),
                        "checks": [vars(c) for c in m.checks],
                    }
                    for m in matches
                ]
            )
            return
        table(
            f"{len(matches)} matching card(s)",
            ["score", *_COLUMNS],
            [[f"{m.terms.score:.3f}", *_row(m.card)] for m in matches],
        )
        if explain:
            for m in matches:
                console.print(
                    f"[bold]{str(m.card.card_id)[:8]}[/bold] "
                    + "; ".join(f"{c.expression}: {c.verdict.value}" for c in m.checks)
                )
