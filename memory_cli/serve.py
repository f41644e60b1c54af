"""`hindsight serve` (the read API) and `hindsight mcp` (the same service over MCP)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import err_console, literal

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_core.serve.keys import Principal
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

KEY_ENV = "HINDSIGHT_API_KEY"


def _service(engine: Engine, settings: Settings) -> MemoryService:
    """The service a server runs: its big namespaces are saved to snapshot files and read
    from them on a cold start (HINDSIGHT_SERVE__SNAPSHOT_FILE_MIN_CARDS)."""
    from memory_core.serve.service import MemoryService
    from memory_core.serve.snapshot_restore import snapshot_files

    service = MemoryService(engine=engine, settings=settings)
    service.snapshots.files = snapshot_files(settings)
    return service


def serve(
    host: Annotated[str | None, typer.Option(help="default: the setting (127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="default: the setting (8765)")] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1, help="processes, forked after the keyed namespaces' snapshots were loaded"
        ),
    ] = 1,
) -> None:
    """Run the read API (OpenAPI docs at /docs)."""
    import uvicorn

    from memory_api.app import create_app

    with fail_on_errors():
        settings, engine = load()
        app = create_app(_service(engine, settings), freeze_gc=True)
    bind_host = host or settings.serve.host
    bind_port = port if port is not None else settings.serve.port
    base = f"http://{bind_host}:{bind_port}"
    from memory_api.ui import CONSOLE_PATH

    err_console.print(
        f"console: {base}{CONSOLE_PATH}\n"
        f"read API on {base} (docs: {base}/docs, metrics: {base}/metrics); Ctrl-C stops it",
        highlight=False,
        soft_wrap=True,
    )
    # httptools and uvloop (uvicorn[standard]) are picked when installed, as they are
    config = {"host": bind_host, "port": bind_port, "log_level": "warning", "access_log": False}
    if workers == 1:
        uvicorn.run(app, **config)  # type: ignore[arg-type]
        return
    from memory_api.prefork import serve_forked

    serve_forked(app, app.state.service, workers=workers, **config)


def mcp(
    http: Annotated[bool, typer.Option("--http", help="streamable HTTP instead of stdio")] = False,
    host: Annotated[str | None, typer.Option(help="HTTP only")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP only; default 8766")] = None,
    read_only: Annotated[bool, typer.Option(help="offer no tools that write")] = False,
) -> None:
    """Run the MCP server. stdio: the key comes from $HINDSIGHT_API_KEY; HTTP: each request
    sends `Authorization: Bearer <key>`."""
    with fail_on_errors():
        settings, engine = load()
        if read_only:
            settings.serve.mcp_write_tools = False
        service = _service(engine, settings)
        if not http:
            principal = _stdio_principal(service)
    service.start()
    try:
        if http:
            import uvicorn

            from memory_api.mcp_http import mcp_http_app

            bind_host = host or settings.serve.host
            bind_port = port if port is not None else settings.serve.mcp_port
            err_console.print(
                f"MCP over streamable HTTP on http://{bind_host}:{bind_port}/mcp "
                "(each request: Authorization: Bearer <key>); Ctrl-C stops it",
                highlight=False,
            )
            uvicorn.run(
                mcp_http_app(service),
                host=bind_host,
                port=bind_port,
                log_level="warning",
            )
        else:
            from memory_api.mcp_server import create_mcp

            create_mcp(
                service, principal=principal, write_tools=settings.serve.mcp_write_tools
            ).run("stdio")
    finally:
        service.close()


def _stdio_principal(service: MemoryService) -> Principal:
    """The caller of a stdio server, from $HINDSIGHT_API_KEY; without a valid key the server
    exits before the MCP handshake with one line on stderr (the client shows it) and code 2:
    the client's configuration needs the key, no traceback."""
    from memory_core.errors import Unauthorized

    try:
        return service.authenticate(os.environ.get(KEY_ENV))
    except Unauthorized as exc:
        service.close()
        err_console.print(
            f"[red]error:[/red] {literal(exc)}; the MCP server over stdio reads its key from "
            f"${KEY_ENV} (make one with `hindsight keys create --namespace NS`)",
            soft_wrap=True,
        )
        raise typer.Exit(2) from None
