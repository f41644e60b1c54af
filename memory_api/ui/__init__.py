"""The web console under /ui: server-rendered pages over the same MemoryService as the API."""

from __future__ import annotations

from fastapi import FastAPI

from memory_api.ui import (
    card_list,
    cards,
    curate,
    datadocs,
    dead_letters,
    docs,
    namespace_page,
    ops,
    queries,
    review,
    siblings,
)
from memory_api.ui.web import HERE, Console

CONSOLE_PATH = "/ui"  # the console's first page (it asks for a key)


def mount_console(app: FastAPI, service: object) -> None:
    """Add the console pages, their static files and the offline /docs and /redoc."""
    from fastapi.staticfiles import StaticFiles

    from memory_core.serve.service import MemoryService

    assert isinstance(service, MemoryService)
    console = Console(service)
    app.mount("/ui/static", StaticFiles(directory=str(HERE / "static")), name="ui-static")
    for module in (
        cards,
        card_list,
        siblings,
        review,
        ops,
        curate,
        dead_letters,
        queries,
        datadocs,
        namespace_page,
    ):
        app.include_router(module.router(console))
    docs.install(app)
