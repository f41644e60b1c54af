"""`hindsight review`: the cards waiting for a person (list, show, approve, reject, edit)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli import ids
from memory_cli.context import fail_on_errors, load, read_json_arg
from memory_cli.output import Format, console, print_json, shown_of, table
from memory_core.errors import InvalidInput

if TYPE_CHECKING:
    pass

app = typer.Typer(help="Cards waiting for a person.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="namespace (default: the setting)")]
ActorOpt = Annotated[str | None, typer.Option("--by", help="who decides (default: $USER)")]


def _actor(by: str | None) -> str:
    import getpass

    return by or os.environ.get("USER") or getpass.getuser()


@app.command("list")
def list_cmd(
    namespace: NamespaceOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=10000)] = 100,
    quarantined: Annotated[
        bool, typer.Option("--quarantined", help="the quarantined cards too, ahead of the rest")
    ] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Cards in review, riskiest first: by origin (llm, user, observed, operator, then
    agent_action), then oldest first; with --quarantined the quarantined cards lead."""
    from sqlmodel import Session

    from memory_core.cards.query import count_cards, to_public
    from memory_core.screen.provenance import origin_of
    from memory_core.validate.review import review_queue

    with fail_on_errors():
        settings, engine = load()
        ns = namespace or settings.namespace
        cards = review_queue(engine=engine, namespace=ns, limit=limit, quarantined=quarantined)
        if fmt is Format.json:
            from memory_core.effects.cards import tests_for

            rules = settings.decay.effects
            tests = tests_for(engine=engine, namespaces=[ns], rules=rules)
            print_json([to_public(c, rules=rules, harms=tests.get(c.card_id)) for c in cards])
            return
        statuses = ["review", *(["quarantined"] if quarantined else [])]
        with Session(engine) as session:
            total = count_cards(session=session, namespace=ns, statuses=statuses)
        table(
            f"cards in review in {ns!r}: {shown_of(len(cards), total)} (riskiest first)",
            ["id", "status", "origin", "conf", "scenario", "preconditions"],
            [
                [
                    str(c.card_id),
                    c.status,
                    origin_of(c.provenance).value,
                    f"{c.confidence:.2f}",
                    c.scenario,
                    "\n".join(c.preconditions),
                ]
                for c in cards
            ],
        )
        if len(cards) < total:
            console.print(f"all of them: --limit {total}", markup=False)


@app.command("show")
def show(card_id: str, namespace: NamespaceOpt = None) -> None:
    """One card in full (as JSON)."""
    from memory_core.cards.query import get_card

    with fail_on_errors():
        settings, engine = load()
        from sqlmodel import Session

        with Session(engine) as session:
            print_json(
                get_card(
                    session=session,
                    namespace=namespace or settings.namespace,
                    card_id=ids.card_id(card_id, engine=engine),
                    rules=settings.decay.effects,
                )
            )


@app.command("approve")
def approve(
    card_id: str,
    namespace: NamespaceOpt = None,
    by: ActorOpt = None,
    reason: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Make a card in review active."""
    from memory_core.validate.review import decide

    with fail_on_errors():
        settings, engine = load()
        card = decide(
            engine=engine,
            namespace=namespace or settings.namespace,
            card_id=ids.card_id(card_id, engine=engine),
            approve=True,
            actor=_actor(by),
            reason=reason,
        )
        console.print(f"approved {card.card_id} (version {card.version})")


@app.command("reject")
def reject(
    card_id: str,
    reason: Annotated[str, typer.Option(help="why (required)")],
    namespace: NamespaceOpt = None,
    by: ActorOpt = None,
) -> None:
    """Reject a card in review, with the reason."""
    from memory_core.validate.review import decide

    with fail_on_errors():
        settings, engine = load()
        card = decide(
            engine=engine,
            namespace=namespace or settings.namespace,
            card_id=ids.card_id(card_id, engine=engine),
            approve=False,
            actor=_actor(by),
            reason=reason,
        )
        console.print(f"rejected {card.card_id} (version {card.version})")


@app.command("edit")
def edit_cmd(
    card_id: str,
    set_json: Annotated[
        str | None,
        typer.Option(
            "--set", help="changes as JSON, @file or -; without it $EDITOR opens the card"
        ),
    ] = None,
    namespace: NamespaceOpt = None,
    by: ActorOpt = None,
) -> None:
    """Change fields of a card in review; the edit is validated before it is saved."""
    from memory_core.cards.query import get_card
    from memory_core.validate.review import EDITABLE, edit

    with fail_on_errors():
        settings, engine = load()
        ns, cid = namespace or settings.namespace, ids.card_id(card_id, engine=engine)
        if set_json is not None:
            changes = read_json_arg(set_json, field="set")
        else:
            from sqlmodel import Session

            with Session(engine) as session:
                current = get_card(session=session, namespace=ns, card_id=cid)
            fields = {k: v for k, v in current.model_dump(mode="json").items() if k in EDITABLE}
            changes = _edit_in_editor(fields)
        if not isinstance(changes, dict):
            raise InvalidInput("changes must be a JSON object", field="set")
        card = edit(
            engine=engine,
            namespace=ns,
            card_id=cid,
            changes=changes,
            actor=_actor(by),
            registry=settings.review.registry,
        )
        console.print(f"saved {card.card_id} (version {card.version}); still in review")


def _edit_in_editor(fields: dict[str, object]) -> object:
    with tempfile.NamedTemporaryFile("w+", suffix=".json", delete=False) as f:
        json.dump(fields, f, indent=2)
        path = f.name
    subprocess.run([os.environ.get("EDITOR", "vi"), path], check=True)
    with open(path, encoding="utf-8") as f:
        edited = json.load(f)
    os.unlink(path)
    return {k: v for k, v in edited.items() if fields.get(k) != v}
