"""`hindsight dead-letters`: trajectories whose extraction kept failing (their retrospection,
or the LLM part of their facts); list, re-drive, or discard with a reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, print_json, shown_of, table

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

app = typer.Typer(help="Dead-lettered trajectories.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


@app.command("list")
def list_cmd(
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 1000,
    fmt: FormatOpt = Format.table,
) -> None:
    """Dead letters with their error, the parts parked and how many times they were claimed."""
    from memory_core.redact import redact
    from memory_core.retrospect.dead_letters import dead_letter_error, dead_parts, list_dead_letters

    with fail_on_errors():
        _, engine = load()
        rows = list_dead_letters(engine=engine, namespace=namespace, limit=limit)
        if fmt is Format.json:
            print_json(
                [
                    {
                        "id": str(r.id),
                        "key": redact(r.key),  # an agent may name its runs by a secret
                        "namespace": r.namespace,
                        "attempts": r.attempts,
                        "parts": [p.part for p in dead_parts(r)],
                        "error": redact(dead_letter_error(r)),  # as the console shows it
                    }
                    for r in rows
                ]
            )
            return
        total = _count(engine, namespace) if len(rows) == limit else len(rows)
        table(
            f"dead letters: {shown_of(len(rows), total)}",
            ["id", "key", "namespace", "attempts", "error"],
            [
                [
                    str(r.id),
                    redact(r.key)[:40],
                    r.namespace,
                    r.attempts,
                    redact(dead_letter_error(r)),
                ]
                for r in rows
            ],
        )
        if len(rows) < total:
            console.print(f"all of them: --limit {total}", markup=False)


@app.command("rejected")
def rejected_cmd(
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 1000,
    fmt: FormatOpt = Format.table,
) -> None:
    """Rejections: LLM answers wrong by content and drafts that failed their grounding or the
    trust screen (not dead letters: a retry would get the same answer), with the reason; json
    adds the raw answer."""
    from dataclasses import asdict, replace

    from memory_core.redact import redact
    from memory_core.retrospect.dead_letters import list_rejections

    with fail_on_errors():
        _, engine = load()
        rows = [  # redacted as the console shows them: a model's answer is derived text
            replace(r, key=redact(r.key), reason=redact(r.reason), raw=redact(r.raw))
            for r in list_rejections(engine=engine, namespace=namespace, limit=limit)
        ]
        if fmt is Format.json:
            print_json([{**asdict(r), "trajectory_id": str(r.trajectory_id)} for r in rows])
            return
        table(
            f"rejections: {len(rows)}",
            ["id", "key", "part", "reason", "times", "at"],
            [
                [str(r.trajectory_id), r.key[:40], r.part, r.reason, r.repeats + 1, r.at[:19]]
                for r in rows
            ],
        )


def _count(engine: Engine, namespace: str | None) -> int:
    """Every dead letter (a full page may not be all of them): parked retrospection or facts."""
    from memory_core.retrospect.dead_letters import count_dead_letters

    return count_dead_letters(engine=engine, namespace=namespace)


def _id_or_key(value: str, engine: Engine) -> str:
    """A trajectory's key as given; else its id, full or any unique prefix (as the tables
    show it); an ambiguous prefix is refused with the ids it matches."""
    from sqlalchemy import select
    from sqlmodel import Session, col

    from memory_cli.ids import MIN_PREFIX, resolve_id
    from memory_core.models.trajectory import Trajectory

    with Session(engine) as session:
        found = session.execute(select(col(Trajectory.id)).where(col(Trajectory.key) == value))
        if found.first() is not None:
            return value
    hexed = value.strip().lower().replace("-", "")
    if len(hexed) < MIN_PREFIX or any(c not in "0123456789abcdef" for c in hexed):
        return value  # not an id: a key that matches nothing re-drives nothing
    tid = resolve_id(value, engine=engine, column=Trajectory.id, field="id", what="trajectory")
    return str(tid)


@app.command("redrive")
def redrive_cmd(
    ids: Annotated[
        list[str] | None,
        typer.Argument(help="ids (or any unique prefix) or keys; none: all"),
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
) -> None:
    """Send dead letters back to the queue; the next retrospect (and facts) run picks them up."""
    from memory_core.retrospect.dead_letters import redrive

    with fail_on_errors():
        _, engine = load()
        chosen = [_id_or_key(i, engine) for i in ids] if ids else None
        n = redrive(engine=engine, ids=chosen, namespace=namespace)
        console.print(
            f"{n} dead letter(s) back to pending; run `hindsight retrospect` "
            "(and `hindsight facts extract` for parked facts) next"
        )


@app.command("discard")
def discard_cmd(
    ids: Annotated[
        list[str] | None,
        typer.Argument(help="ids (or any unique prefix) or keys"),
    ] = None,
    reason: Annotated[str, typer.Option(help="why the runs are given up on (kept with them)")] = "",
    every: Annotated[
        bool, typer.Option("--all", help="every dead letter (of --namespace)")
    ] = False,
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
    by: Annotated[str | None, typer.Option(help="who decided (default: cli:USER)")] = None,
) -> None:
    """Give up on dead letters, as the console's Discard does: they leave the list, and each
    run's record keeps who, when, why and the errors it had."""
    import getpass

    from memory_core.errors import InvalidInput
    from memory_core.retrospect.discard import discard

    with fail_on_errors():
        if bool(ids) == every:
            raise InvalidInput("name the dead letters to discard, or --all", field="ids")
        _, engine = load()
        chosen = [_id_or_key(i, engine) for i in ids] if ids else None
        n = discard(
            engine=engine,
            ids=chosen,
            namespace=namespace,
            reason=reason,
            actor=by or f"cli:{getpass.getuser()}",
        )
        console.print(f"{n} dead letter(s) discarded: {reason.strip()}", markup=False)
