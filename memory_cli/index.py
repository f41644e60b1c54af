"""`hindsight index`: rebuild the vector index from the database, and check it for drift."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, err_console, polled_progress, print_json, table

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_core.embed.base import Embedder
    from memory_core.index.sync import Drift
    from memory_core.settings import Settings


app = typer.Typer(help="The vector index (derived from the database).", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="only this namespace (default: all)")]
ModelOpt = Annotated[
    str | None, typer.Option(help="embedding model (default: the embedder's, or the stored one)")
]


def _model_and_dim(engine: Engine, embedder: Embedder | None, model: str | None) -> tuple[str, int]:
    from memory_core.index.sync import index_model

    return index_model(engine=engine, embedder=embedder, model=model, field="--model")


def _embed_first(settings: Settings, engine: Engine, namespace: str | None) -> Embedder | None:
    from memory_core.embed.factory import build_embedder
    from memory_core.embed.store import ensure_embeddings

    embedder = build_embedder(settings)
    if embedder is None:
        err_console.print("no embedder configured: indexing the vectors already stored")
        return None
    state = [0, 0]

    def bump(done: int, total: int) -> None:
        state[0], state[1] = done, total

    with polled_progress(f"embed ({embedder.model})", lambda: (state[0], state[1])):
        ensure_embeddings(engine=engine, embedder=embedder, namespace=namespace, on_progress=bump)
    return embedder


@app.command("rebuild")
def rebuild(
    namespace: NamespaceOpt = None,
    model: ModelOpt = None,
    embed: Annotated[bool, typer.Option(help="embed cards lacking a vector first")] = True,
    recreate: Annotated[
        bool, typer.Option(help="drop the index first (needed when the dimension changed)")
    ] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Fill the index with every active card's stored vector; drop points of other cards."""
    from memory_core.index.factory import index_path, open_index
    from memory_core.index.sync import rebuild_index

    with fail_on_errors():
        settings, engine = load()
        embedder = _embed_first(settings, engine, namespace) if embed else None
        name, dim = _model_and_dim(engine, embedder, model)
        index = open_index(settings, dim=dim, recreate=recreate)
        try:
            state = [0, 0]

            def bump(done: int, total: int) -> None:
                state[0], state[1] = done, total

            with polled_progress("index", lambda: (state[0], state[1])):
                report = rebuild_index(
                    engine=engine, index=index, model=name, namespace=namespace, on_progress=bump
                )
        finally:
            index.close()
        if fmt is Format.json:
            print_json(asdict(report) | {"index": index_path(settings), "dim": dim})
            return
        table(
            f"index rebuild ({index_path(settings)})",
            ["model", "dim", "namespace", "upserted", "deleted"],
            [[report.model, dim, report.namespace or "(all)", report.upserted, report.deleted]],
        )


@app.command("check")
def check(
    namespace: NamespaceOpt = None,
    model: ModelOpt = None,
    show: Annotated[int, typer.Option(min=0, help="ids listed per kind of drift")] = 20,
    fmt: FormatOpt = Format.table,
) -> None:
    """Report drift: active cards missing from the index, stale points. Exit 1 on drift."""
    from memory_core.embed.factory import build_embedder
    from memory_core.index.factory import index_path, open_index
    from memory_core.index.sync import check_index

    with fail_on_errors():
        settings, engine = load()
        name, dim = _model_and_dim(engine, build_embedder(settings), model)
        index = open_index(settings, dim=dim)
        try:
            drift = check_index(engine=engine, index=index, model=name, namespace=namespace)
        finally:
            index.close()
        _show_drift(drift, fmt, show=show, where=index_path(settings))
    if not drift.clean:
        raise typer.Exit(1)


def _show_drift(drift: Drift, fmt: Format, *, show: int, where: str) -> None:
    if fmt is Format.json:
        print_json(
            asdict(drift)
            | {"missing_count": drift.missing_count, "stale_count": drift.stale_count}
            | {"index": where}
        )
        return
    table(
        f"index check ({where})",
        ["model", "namespace", "served", "indexed", "missing", "stale"],
        [
            [
                drift.model,
                drift.namespace or "(all)",
                drift.expected,
                drift.indexed,
                drift.missing_count,
                drift.stale_count,
            ]
        ],
    )
    rows = [["missing", str(c)] for c in drift.missing[:show]]
    rows += [["stale", str(c)] for c in drift.stale[:show]]
    if rows:
        table("drift", ["kind", "card id"], rows)
        console.print("fix it with: hindsight index rebuild")
    else:
        console.print("[green]no drift[/green]")
