"""`hindsight facts`: add, search, forget and extract key / query / value facts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli.context import datetime_arg, fail_on_errors, load
from memory_cli.ids import card_id
from memory_cli.output import Format, console, err_console, literal, print_json, table
from memory_core.errors import InvalidInput
from memory_core.screen.provenance import origin_of

if TYPE_CHECKING:
    from sqlmodel import Session

    from memory_core.models.card import CardPublic


app = typer.Typer(
    help="Facts: what an agent should know (key, query, value).", no_args_is_help=True
)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="namespace (default: the setting)")]
_COLUMNS = ["id", "status", "standing", "origin", "key", "query", "value", "valid until", "conf"]


def _row(f: CardPublic) -> list[object]:
    until = f.valid_until.isoformat(timespec="minutes") if f.valid_until else ""
    origin = origin_of(f.provenance).value
    if f.provenance.get("conflicts_with"):
        origin += " (conflicting)"
    standing = f.standing or ""
    if f.standing == "claim" and f.speaker:
        standing = f"claim of {f.speaker}"
    return [
        str(f.card_id)[:8],
        f.status,
        standing,
        origin,
        f.key,
        f.query,
        f.value,
        until,
        f"{f.confidence:.2f}",
    ]


@app.command("add")
def add(
    key: Annotated[str, typer.Argument(help="whom or what it is about, e.g. user.editor")],
    value: Annotated[str, typer.Argument(help="the short conclusion")],
    query: Annotated[str | None, typer.Option(help="the question it answers")] = None,
    valid_until: Annotated[str | None, typer.Option(help="ISO date/time it expires")] = None,
    namespace: NamespaceOpt = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Store a fact; an older value for the same key and query is superseded."""
    from pydantic import ValidationError

    from memory_core.facts.store import FactIn, write_fact

    with fail_on_errors():
        settings, engine = load()
        until = datetime_arg(valid_until, field="valid_until")
        try:
            fact = FactIn(key=key, value=value, query=query, valid_until=until)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise InvalidInput(first["msg"], field=field) from exc
        card = write_fact(
            engine=engine, namespace=namespace or settings.namespace, fact=fact, actor="cli"
        )
        if fmt is Format.json:
            print_json(card)
            return
        table("fact", _COLUMNS, [_row(card)])


@app.command("search")
def search(
    text: Annotated[str, typer.Argument(help="what to look for")],
    all_: Annotated[bool, typer.Option("--all", help="include superseded and expired")] = False,
    claims: Annotated[
        bool, typer.Option("--claims", help="include claims: what only a speaker said")
    ] = False,
    top_k: Annotated[int, typer.Option(min=1, max=100)] = 5,
    namespace: NamespaceOpt = None,
    fmt: FormatOpt = Format.table,
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="what was true then: an ISO date or date and time (UTC)"),
    ] = None,
) -> None:
    """The facts that best answer TEXT: keywords and, with an embedder, vectors (fused by
    rank), blended with the decay-aware card score."""
    from memory_core.facts.as_of import parse_as_of
    from memory_core.facts.search import search_facts
    from memory_core.index.similar import vector_search

    with fail_on_errors():
        settings, engine = load()
        with vector_search(settings=settings, engine=engine) as (vectors, why_not):
            hits = search_facts(
                engine=engine,
                namespace=namespace or settings.namespace,
                text=text,
                top_k=top_k,
                include_superseded=all_,
                include_claims=claims,
                weights=settings.ranking,
                vectors=vectors,
                as_of=parse_as_of(as_of) if as_of else None,
            )
        if why_not:
            err_console.print(f"[yellow]{why_not}[/yellow]")
        if fmt is Format.json:
            print_json(hits)
            return
        from sqlmodel import Session

        from memory_core.cards.query import count_cards

        ns = namespace or settings.namespace
        with Session(engine) as session:
            searched = count_cards(
                session=session, namespace=ns, kind="fact", statuses=None if all_ else ["active"]
            )
            hidden = 0 if claims else _claims(session, ns)
        table(
            f"{len(hits)} best fact(s) for {text!r} of {searched} "
            f"{'' if all_ else 'active '}in {ns!r}",
            ["score", *_COLUMNS],
            [[f"{h.score:.3f}", *_row(h.fact)] for h in hits],
        )
        if hidden:
            err_console.print(
                f"{hidden} claim(s) (what only a speaker said) not searched: --claims shows them"
            )


def _claims(session: Session, namespace: str) -> int:
    """Active claims of the namespace (search leaves them out unless asked)."""
    from sqlalchemy import func, select
    from sqlmodel import col

    from memory_core.models.card import Card, FactStanding

    q = select(func.count()).where(
        col(Card.namespace) == namespace,
        col(Card.kind) == "fact",
        col(Card.status) == "active",
        col(Card.standing) == FactStanding.claim.value,
    )
    return int(session.execute(q).scalar_one())


@app.command("forget")
def forget(
    fact_id: Annotated[str, typer.Argument(help="the fact's id, or a unique prefix of it")],
    namespace: NamespaceOpt = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Take a fact out of retrieval for good (its history stays)."""
    from memory_core.facts.store import forget_fact

    with fail_on_errors():
        settings, engine = load()
        fid = card_id(fact_id, engine=engine, field="fact_id")
        card = forget_fact(
            engine=engine, namespace=namespace or settings.namespace, fact_id=fid, actor="cli"
        )
        if fmt is Format.json:
            print_json(card)
            return
        table("forgotten", _COLUMNS, [_row(card)])


@app.command("extract")
def extract(namespace: NamespaceOpt = None, fmt: FormatOpt = Format.table) -> None:
    """Extract facts from trajectories and conversations not yet done (rules; the LLM too
    when HINDSIGHT_LLM__BASE_URL is set)."""
    from memory_core.facts.llm import build_fact_extractor
    from memory_core.facts.stage import extract_facts

    with fail_on_errors():
        settings, engine = load()
        report = extract_facts(
            engine=engine,
            namespace=namespace,
            llm=build_fact_extractor(settings, engine),
            screen=settings.screen,
        )
        summary = vars(report)
        if fmt is Format.json:
            print_json(summary)
            return
        shown = {
            k: v for k, v in summary.items() if k != "errors" and (v or not k.startswith("llm"))
        }
        table("facts", list(shown), [list(shown.values())])
        for error in report.errors:
            console.print(f"[yellow]{literal(error)}[/yellow]")
