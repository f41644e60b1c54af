"""`hindsight keys`: API keys (create, list, revoke); each key sees one namespace."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, err_console, print_json, shown_of, table

app = typer.Typer(help="API keys: each sees one namespace.", no_args_is_help=True)
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


@app.command("create")
def keys_create(
    namespace: Annotated[str, typer.Option(help="the one namespace this key sees")],
    scopes: Annotated[str, typer.Option(help="comma-separated: read, write, admin")] = "read",
    name: Annotated[str, typer.Option(help="a label for lists")] = "",
    fmt: FormatOpt = Format.table,
) -> None:
    """Create a key and print it once (only its hash is stored)."""
    from memory_core.serve.keys import create_key

    with fail_on_errors():
        _, engine = load()
        key, secret = create_key(
            engine=engine, namespace=namespace, scopes=scopes.split(","), name=name
        )
    if fmt is Format.json:
        print_json(
            {"id": str(key.id), "namespace": key.namespace, "scopes": key.scopes, "key": secret}
        )
        return
    err_console.print(
        f"key {key.id} for namespace {key.namespace!r}, scopes {','.join(key.scopes)} "
        "(shown once; store it now):"
    )
    console.print(secret, soft_wrap=True, markup=False, highlight=False)


@app.command("list")
def keys_list(
    namespace: Annotated[str | None, typer.Option()] = None, fmt: FormatOpt = Format.table
) -> None:
    """Keys (never the secrets)."""
    from memory_core.serve.keys import list_keys

    with fail_on_errors():
        _, engine = load()
        keys = list_keys(engine=engine, namespace=namespace)
    rows = [
        [
            str(k.id),
            k.prefix + "...",
            k.namespace,
            ",".join(k.scopes),
            k.name,
            k.created_at.isoformat(timespec="seconds"),
            k.last_used_at.isoformat(timespec="seconds") if k.last_used_at else "",
            k.revoked_at.isoformat(timespec="seconds") if k.revoked_at else "",
        ]
        for k in keys
    ]
    cols = ["id", "prefix", "namespace", "scopes", "name", "created", "last used", "revoked"]
    if fmt is Format.json:
        print_json([dict(zip(cols, r, strict=True)) for r in rows])
    else:
        table(f"API keys: {shown_of(len(rows), len(rows))}", cols, rows)


@app.command("revoke")
def keys_revoke(key_id: str) -> None:
    """Revoke a key (running servers stop accepting it within their key cache time)."""
    from memory_core.serve.keys import revoke_key

    with fail_on_errors():
        from memory_cli.ids import resolve_id
        from memory_core.models.api_key import ApiKey

        _, engine = load()
        kid = resolve_id(key_id, engine=engine, column=ApiKey.id, field="key_id", what="key")
        key = revoke_key(engine=engine, key_id=kid)
    console.print(f"revoked {key.id} ({key.namespace})")
