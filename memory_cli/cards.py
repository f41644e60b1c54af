"""`hindsight cards`: list, show and query cards; record outcome feedback; pin."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli import ids
from memory_cli.card_table import columns_and_rows
from memory_cli.context import fail_on_errors, load, read_json_arg
from memory_cli.output import Format, console, err_console, print_json, shown_of, table
from memory_core.errors import InvalidInput

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


app = typer.Typer(help="Inspect and query experience cards.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="namespace (default: the setting)")]


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
    from sqlmodel import Session

    from memory_core.cards.query import count_cards, list_cards, to_public

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
            total = count_cards(
                session=session,
                namespace=ns,
                statuses=status,
                kind=kind,
                text=text,
                min_confidence=min_confidence,
            )
        from memory_core.effects.cards import tests_for

        rules = settings.decay.effects
        tests = tests_for(engine=engine, namespaces=[ns], rules=rules)
        if fmt is Format.json:
            print_json([to_public(c, rules=rules, harms=tests.get(c.card_id)) for c in cards])
            return
        columns, rows = columns_and_rows(list(cards), rules=rules, tests=tests)
        table(f"cards in {ns!r}: {shown_of(len(cards), total, offset)}", columns, rows)
        if offset + len(cards) < total:
            console.print(f"next page: --offset {offset + len(cards)} (or --limit {total})")


@app.command("show")
def show(card_id: str, namespace: NamespaceOpt = None, fmt: FormatOpt = Format.table) -> None:
    """One card with its evidence."""
    from sqlmodel import Session

    from memory_core.cards.query import get_card

    with fail_on_errors():
        settings, engine = load()
        cid = ids.card_id(card_id, engine=engine)
        with Session(engine) as session:
            card = get_card(
                session=session,
                namespace=namespace or settings.namespace,
                card_id=cid,
                rules=settings.decay.effects,
            )
        if fmt is Format.json:
            print_json(card)
            return
        from memory_cli.effects import effect_cell

        fields = card.model_dump(mode="json", exclude={"evidence", "effect", "backtest"})
        fields["effect"] = effect_cell(card.effect)
        table(f"card {card.card_id}", ["field", "value"], [[k, v] for k, v in fields.items()])
        if card.backtest is not None:
            b = card.backtest
            verdict = "passes the gate" if b.serve else "waits in review"
            console.print(
                f"backtest: {verdict}: {b.reason}\n  {b.groups} task group(s), {b.checked} later "
                f"runs checked, {b.fired} warnings fired, {b.right} right, {b.wrong} wrong"
                + (f", lower bound {b.low:.2f}" if b.low is not None else "")
            )
            if b.runs:
                table(
                    "backtest warnings (latest first)",
                    ["run", "call", "tool", "right", "error"],
                    [[r["run"], r["call"], r["tool"], r["right"], r["error"]] for r in b.runs],
                )
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
    text: Annotated[
        str | None, typer.Option("--text", help="free text blended into the ranking")
    ] = None,
    explain: Annotated[bool, typer.Option(help="show each precondition's verdict")] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Active cards whose preconditions hold on the task state, best first: the same retrieval
    and ranking the API and MCP serve (not counted as a use)."""
    from memory_core.serve.keys import Principal
    from memory_core.serve.schemas import QueryRequest
    from memory_core.serve.service import MemoryService

    with fail_on_errors():
        settings, engine = load()
        task_state = read_json_arg(state, field="state")
        if not isinstance(task_state, dict):
            raise InvalidInput("the task state must be a JSON object", field="state")
        request = QueryRequest(
            task_state=task_state, top_k=top_k, query=text, explain=explain, record_use=False
        )
        local = Principal(
            key_id=uuid.UUID(int=0),
            namespace=namespace or settings.namespace,
            scopes=frozenset({"read"}),
        )
        result = MemoryService(engine=engine, settings=settings).query(
            principal=local, request=request, via="cli"
        )
        hits = result.cards
        unread = result.explain.unread_variables if result.explain else []
        if fmt is Format.json:
            for u in unread:  # stdout stays the JSON list of hits
                err_console.print(u.message, markup=False, soft_wrap=True)
            from memory_core.effects.cards import judged_all

            cards = judged_all([h.card for h in hits], engine=engine, rules=settings.decay.effects)
            print_json(
                [
                    h.model_copy(update={"card": c}).model_dump(mode="json", exclude={"use_id"})
                    for h, c in zip(hits, cards, strict=True)
                ]
            )
            return
        from sqlmodel import Session

        from memory_core.cards.query import count_cards
        from memory_core.effects.cards import tests_for

        with Session(engine) as session:
            active = count_cards(
                session=session, namespace=namespace or settings.namespace, statuses=["active"]
            )
        columns, rows = columns_and_rows(
            [h.card for h in hits],
            lead=[[f"{h.score.score:.3f}"] for h in hits],
            rules=settings.decay.effects,
            tests=tests_for(
                engine=engine,
                namespaces=[namespace or settings.namespace],
                rules=settings.decay.effects,
            ),
        )
        table(f"{len(hits)} matching card(s) of {active} active", ["score", *columns], rows)
        if explain:
            for u in unread:
                console.print(u.message, markup=False, soft_wrap=True)
            for h in hits:
                console.print(
                    f"[bold]{str(h.card.card_id)[:8]}[/bold] "
                    + "; ".join(f"{c.expression}: {c.verdict}" for c in h.checks or [])
                )


class FeedbackOutcome(StrEnum):
    """How the task that used the card ended."""

    success = "success"
    failure = "failure"


@app.command("feedback")
def feedback(
    card_id: str,
    outcome: Annotated[FeedbackOutcome, typer.Argument(help="success or failure")],
    namespace: NamespaceOpt = None,
    use_id: Annotated[
        str | None, typer.Option(help="the use this outcome belongs to (default: a new use)")
    ] = None,
    by: Annotated[str, typer.Option("--by", help="who reports it")] = "cli",
    fmt: FormatOpt = Format.table,
) -> None:
    """Record the outcome of a task that used the card: +0.05 on success, -0.1 on failure;
    three failures in a row send it to review."""
    from memory_core.decay.feedback import record_feedback, streak_rule

    with fail_on_errors():
        settings, engine = load()
        ns = namespace or settings.namespace
        result = record_feedback(
            engine=engine,
            namespace=ns,
            card_id=ids.card_id(card_id, engine=engine),
            outcome=outcome.value,
            use_id=_use_id(use_id, engine) if use_id else None,
            actor=by,
            failures_to_review=settings.review.failures_in_a_row,
            measure=streak_rule(settings, ns),
        )
        if fmt is Format.json:
            print_json(result)
            return
        console.print(
            f"{result.card_id}: {result.outcome}, confidence {result.confidence_before:.2f} -> "
            f"{result.confidence:.2f} ({result.success_count} successes, "
            f"{result.failure_count} failures, {result.consecutive_failures} in a row)"
            + ("" if result.recorded else "; already recorded, nothing changed")
        )
        if result.sent_to_review:
            console.print(
                f"[yellow]sent to review[/yellow] after {result.consecutive_failures} failures "
                "in a row: out of retrieval until `hindsight review approve`"
            )
        elif result.held_for_measure:
            console.print(
                f"{result.consecutive_failures} failures in a row, kept in service: the holdout "
                "has not measured the card's effect yet"
            )


def _use_id(value: str, engine: Engine) -> uuid.UUID:
    from memory_core.models.card import CardUse

    return ids.resolve_id(value, engine=engine, column=CardUse.id, field="use_id", what="use")


@app.command("history")
def history(card_id: str, fmt: FormatOpt = Format.table) -> None:
    """Every version of a card or fact: when, who, why."""
    from memory_core.serve.reads import card_history

    with fail_on_errors():
        _, engine = load()
        # the served read: reasons and snapshots redacted as the API and MCP server show them
        card, versions = card_history(engine=engine, card_id=ids.card_id(card_id, engine=engine))
        if fmt is Format.json:
            print_json({"card": card, "versions": versions, "total": len(versions)})
            return
        pointer = f"; replaced by {card.superseded_by}" if card.superseded_by else ""
        console.print(f"{card.card_id} ({card.kind}, {card.status}, v{card.version}){pointer}")
        table(
            f"history: {shown_of(len(versions), len(versions))}",
            ["version", "when (UTC)", "by", "why"],
            [[v.version, f"{v.created_at:%Y-%m-%d %H:%M}", v.actor, v.reason] for v in versions],
        )


@app.command("pin")
def pin(
    card_id: str,
    off: Annotated[bool, typer.Option("--off", help="unpin")] = False,
    namespace: NamespaceOpt = None,
) -> None:
    """Pin a card so the holdout never withholds it (a safety warning), or unpin it."""
    import getpass

    from memory_core.effects.pins import set_pinned

    with fail_on_errors():
        settings, engine = load()
        cid = ids.card_id(card_id, engine=engine)
        card = set_pinned(
            engine=engine,
            namespace=namespace or settings.namespace,
            card_id=cid,
            pinned=not off,
            actor=f"cli:{getpass.getuser()}",
        )
        console.print(f"card {card.card_id}: {'pinned' if card.pinned else 'not pinned'}")
